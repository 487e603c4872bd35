"""The loop ratios on a GPU: bf16-mixed, compiled, ours against raw PyTorch doing the same work.

- Regression: the example's ``fit --config configs/regression.yaml`` on one GPU with
  ``--trainer.precision bf16-mixed --model.compile true`` (TensorBoard logger, checks on):
  ``train_seconds / global_step`` from ``summary.json``, against a plain loop with the
  same data, ``ScalarMLP`` (compiled), AdamW, cosine schedule, epochs and batch under
  ``torch.autocast(bfloat16)``, batches sliced from a permutation of rows kept on the GPU,
  validation R² every epoch, no checks (``JAXTYPING_DISABLE=1``).
- PPO's update step: ``PPOModule.training_step`` on one synthetic CartPole-sized rollout
  (``configs/ppo.yaml``'s network, minibatches and update epochs; compiled networks, bf16),
  timed per optimizer step inside Lightning with the GPU synchronised at both ends, against
  a raw update: the same ``ActorCritic``, PPO loss, minibatches, Adam and gradient clipping.

Each side runs in a fresh process; the two alternate and the ratio is the median over
repeats of each pair's. Without a CUDA device it says so and exits 0, so ``nox -s bench``
can list it; its result then records why nothing was measured, unless a GPU run's result is
already there, which it keeps.

Usage: ``python bench/gpu.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench -- gpu``).
"""

import importlib
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import harness

BATCH, FEATURES, SEED, ROWS, EPOCHS = 256, 8, 0, 8192, 40
PPO_ROLLOUTS, PPO_WARMUP = 12, 2


def regression_raw(package: str) -> dict:
    import torch
    import torch.nn.functional as F

    nets = importlib.import_module(f"{package}.core.nets")
    synthetic = importlib.import_module(f"{package}.regression.data")
    x, y = synthetic.make_synthetic_regression(ROWS, FEATURES, 0.1, SEED)
    order = torch.randperm(ROWS, generator=torch.Generator().manual_seed(SEED))
    num_val = round(0.2 * ROWS)
    train_rows, val_rows = order[num_val:], order[:num_val]
    mean, std = x[train_rows].mean(dim=0), x[train_rows].std(dim=0)
    x_train, x_val = ((x[rows] - mean) / std for rows in (train_rows, val_rows))
    y_train, y_val = y[train_rows], y[val_rows]
    y_mean, y_std = float(y_train.mean()), float(y_train.std())
    x_train, x_val, y_train, y_val = (t.cuda() for t in (x_train, x_val, y_train, y_val))

    torch.manual_seed(SEED)
    net = nets.ScalarMLP(FEATURES, (128, 128), "silu").cuda()
    forward = torch.compile(net)
    steps = EPOCHS * math.ceil(len(y_train) / BATCH)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16)

    harness.sync()
    started = time.perf_counter()  # compile time included, as in ours
    for epoch in range(EPOCHS):
        permutation = torch.randperm(
            len(y_train), generator=torch.Generator().manual_seed(SEED + epoch)
        ).cuda()
        for start in range(0, len(y_train), BATCH):
            batch = permutation[start : start + BATCH]
            with autocast:
                prediction = forward(x_train[batch])
            loss = F.mse_loss(prediction.float(), (y_train[batch] - y_mean) / y_std)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        with torch.no_grad(), autocast:
            predictions = [
                forward(x_val[start : start + BATCH]).float() * y_std + y_mean
                for start in range(0, len(y_val), BATCH)
            ]
        residual = ((torch.cat(predictions) - y_val) ** 2).sum()
        r2 = float(1 - residual / ((y_val - y_val.mean()) ** 2).sum())  # synchronises
    harness.sync()
    return {"seconds_per_step": (time.perf_counter() - started) / steps, "val_r2": r2}


def regression_ours(package: str, root: str) -> dict:
    cli = importlib.import_module(f"{package}.regression.__main__")
    cli.main(
        [
            "fit",
            "--config=configs/regression.yaml",
            "--trainer.accelerator=gpu",
            "--trainer.devices=1",
            "--trainer.precision=bf16-mixed",
            "--model.compile=true",
            f"--trainer.default_root_dir={root}",
            "--trainer.logger=lightning.pytorch.loggers.TensorBoardLogger",
            f"--trainer.logger.save_dir={root}",
        ]
    )
    summary = json.loads(max(Path(root).rglob("summary.json"), key=os.path.getmtime).read_text())
    return {
        "seconds_per_step": summary["train_seconds"] / summary["global_step"],
        "val_r2": summary["val_r2"],
    }


def _ppo_setup(package: str):
    """The tuned model arguments, an ActorCritic-sized synthetic rollout of CartPole's
    shapes, and the module class."""
    import gymnasium as gym
    import torch
    import yaml

    ppo = importlib.import_module(f"{package}.ppo.module")
    rollout = importlib.import_module(f"{package}.ppo.rollout")
    tuned = yaml.safe_load(Path("configs/ppo.yaml").read_text())["model"]
    rows = tuned["num_envs"] * tuned["num_steps"]
    generator = torch.Generator().manual_seed(SEED)
    samples = rollout.Samples(
        observations=torch.randn(rows, 4, generator=generator),
        actions=torch.randint(0, 2, (rows,), generator=generator),
        old_log_prob=torch.full((rows,), math.log(0.5)),
        old_values=torch.randn(rows, generator=generator),
        advantages=torch.randn(rows, generator=generator),
        returns=torch.randn(rows, generator=generator),
    )
    return ppo, tuned, samples, gym.spaces.Discrete(2)


def ppo_ours(package: str, root: str) -> dict:
    import lightning as L

    ppo, tuned, samples, _ = _ppo_setup(package)
    steps_per_rollout = tuned["update_epochs"] * tuned["num_minibatches"]

    class Synthetic(ppo.PPOModule):
        """The module's own update, on a fixed synthetic rollout instead of the envs."""

        def rollouts(self):
            for _ in range(self.rollouts_done, self.num_rollouts):
                yield samples

    class Clock(L.Callback):
        seconds: list[float] = []

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            harness.sync()
            self.started = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            harness.sync()
            if batch_idx >= PPO_WARMUP:  # compile and first checks
                self.seconds.append(time.perf_counter() - self.started)

    model = Synthetic(
        **{
            **tuned,
            "total_env_steps": PPO_ROLLOUTS * tuned["num_envs"] * tuned["num_steps"],
            "eval_every_env_steps": 0,
            "solved_return": None,
            "compile": True,
        }
    )
    trainer = L.Trainer(
        accelerator="gpu",
        devices=1,
        precision="bf16-mixed",
        max_epochs=1,
        default_root_dir=root,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[Clock()],
    )
    trainer.fit(model)
    return {"seconds_per_step": statistics.median(Clock.seconds) / steps_per_rollout}


def ppo_raw(package: str) -> dict:
    import torch

    ppo, tuned, samples, action_space = _ppo_setup(package)
    agent_module = importlib.import_module(f"{package}.ppo.agent")
    torch.manual_seed(SEED)
    agent = agent_module.ActorCritic(4, action_space, tuned["hidden_sizes"]).cuda()
    agent.compile_networks()
    optimizer = torch.optim.Adam(agent.parameters(), lr=tuned["learning_rate"], eps=1e-5)
    rollout = {name: getattr(samples, name).cuda() for name in vars(samples)}
    rows = len(rollout["advantages"])
    minibatch = rows // tuned["num_minibatches"]
    clip = tuned["clip_coef"]
    seconds = []
    for index in range(PPO_ROLLOUTS):
        harness.sync()
        started = time.perf_counter()
        for _ in range(tuned["update_epochs"]):
            for batch in torch.randperm(rows, device="cuda").split(minibatch):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    log_prob, entropy, values = agent.evaluate(
                        rollout["observations"][batch], rollout["actions"][batch]
                    )
                advantages = rollout["advantages"][batch]
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                ratio = torch.exp(log_prob.float() - rollout["old_log_prob"][batch])
                policy = -torch.min(
                    ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages
                ).mean()
                critic = 0.5 * ((values.float() - rollout["returns"][batch]) ** 2).mean()
                loss = (
                    policy
                    + tuned["value_coef"] * critic
                    - tuned["entropy_coef"] * (entropy.float().mean())
                )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), tuned["max_grad_norm"])
                optimizer.step()
        harness.sync()
        if index >= PPO_WARMUP:
            seconds.append(time.perf_counter() - started)
    steps_per_rollout = tuned["update_epochs"] * tuned["num_minibatches"]
    return {"seconds_per_step": statistics.median(seconds) / steps_per_rollout}


WORKERS = {
    ("regression", "raw"): lambda package, root: regression_raw(package),
    ("regression", "ours"): regression_ours,
    ("ppo", "raw"): lambda package, root: ppo_raw(package),
    ("ppo", "ours"): ppo_ours,
}


TARGET = 1.3


def main() -> None:
    if sys.argv[1] == "--worker":
        example, side, package, root = sys.argv[2:6]
        print(json.dumps(WORKERS[example, side](package, root)))
        return
    import torch

    result = harness.Result("gpu")
    if not torch.cuda.is_available():
        print("gpu: no CUDA device here; nothing was measured")
        if not harness.measured("gpu"):  # a GPU run's figures stay until the next GPU run
            result.write([], torch_threads=None, not_run="no CUDA device on the machine")
        return
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    device = torch.cuda.get_device_name()
    print(f"gpu: {device}, torch {torch.__version__}", flush=True)
    figures, details = [], {"device": device}
    for example in ("regression", "ppo"):

        def measure(side: str, repeat: int, example: str = example) -> float:
            root = project / "runs" / "gpu" / f"{example}-{repeat}-{side}"
            command = [__file__, "--worker", example, side, package, str(root)]
            env = harness.one_thread(project, checks=side == "ours")
            return harness.worker(command, cwd=project, env=env, what=f"{example} {side}")[
                "seconds_per_step"
            ]

        seconds: dict[str, list[float]] = {}
        for repeat, seconds in harness.turns(["raw", "ours"], repeats, measure):
            print(
                f"  {example} repeat {repeat}: raw {seconds['raw'][-1] * 1e3:.3f} ms/step, "
                f"ours {seconds['ours'][-1] * 1e3:.3f} ms/step, "
                f"ratio {seconds['ours'][-1] / seconds['raw'][-1]:.2f}",
                flush=True,
            )
        ratio = harness.paired(seconds["ours"], seconds["raw"])
        raw, ours = (statistics.median(seconds[side]) * 1e3 for side in ("raw", "ours"))
        print(
            f"{example} (bf16-mixed, compiled): median ms/step raw {raw:.3f}, ours {ours:.3f}; "
            f"median ratio {ratio:.2f} ({'met' if ratio <= TARGET else 'MISSED'}: <= {TARGET})",
            flush=True,
        )
        figures += [
            harness.figure(f"{example}: raw PyTorch", raw, "ms/step"),
            harness.figure(f"{example}: ours", ours, "ms/step"),
            harness.figure(f"{example}: ours / raw", ratio, at_most=TARGET),
        ]
        details[example] = seconds
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
