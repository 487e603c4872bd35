"""PPO's optimizer step against a raw PyTorch one: the same network, loss, minibatch, Adam
and gradient clipping, one torch thread.

- Ours: ``fit`` of the rendered project's ``configs/ppo.yaml`` through its command line
  (checks on, the guard, the locator, checkpoints, reporting), its whole budget by default
  (the guard's first two rollouts are part of its cost; a short run overstates it); the
  time per optimizer step is summary.json's ``update`` seconds (each rollout's
  ``training_step`` and Lightning's loop around it) over ``global_step``.
- Raw: a plain loop over the same number of steps: two tanh MLPs of the config's sizes, a
  categorical log-probability by ``log_softmax``, the clipped surrogate plus half the
  squared value error, advantages normalised per minibatch, ``clip_grad_norm_``, and the
  Adam that ``PPOModule.configure_optimizers`` builds at full precision (fused), on a
  random rollout of the config's size, minibatches by ``randperm``; per rollout, the
  statistics' means go to Python as ours do.

The two alternate, one process each, so that a shared machine's slow phases fall on both;
the target (at most 1.3) is judged on the median of the paired ratios.
Usage: ``python bench/ppo_update.py PROJECT_DIR PACKAGE [REPEATS [ROLLOUTS]]`` (5 repeats).
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.3


def ours(project: Path, package: str, rollouts: int, rollout_size: int) -> float:
    """Seconds per optimizer step of a real ``fit``."""
    with tempfile.TemporaryDirectory() as root:
        command = [
            sys.executable,
            "-m",
            f"{package}.ppo",
            "fit",
            "--config",
            "configs/ppo.yaml",
            f"--model.total_env_steps={rollouts * rollout_size}",
            "--model.eval_every_env_steps=0",
            f"--trainer.default_root_dir={root}",
        ]
        done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"our PPO failed:\n{done.stderr[-3000:]}")
        (path,) = Path(root).rglob("summary.json")
        summary = json.loads(path.read_text())
    return summary["time_breakdown_seconds"]["update"] / summary["global_step"]


def raw(model: dict, rollouts: int, fused: bool) -> float:
    """Seconds per optimizer step of the plain loop (run in a child process by ``main``)."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)

    def mlp(outputs: int) -> nn.Sequential:
        sizes = [4, *model["hidden_sizes"]]
        layers: list[nn.Module] = []
        for width_in, width_out in zip(sizes, sizes[1:], strict=False):
            layers += [nn.Linear(width_in, width_out), nn.Tanh()]
        return nn.Sequential(*layers, nn.Linear(sizes[-1], outputs))

    actor, critic = mlp(2), mlp(1)
    parameters = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=model["learning_rate"], eps=1e-5, fused=fused)
    size = model["num_envs"] * model["num_steps"]
    minibatch = size // model["num_minibatches"]
    clip, value_coef, max_norm = model["clip_coef"], model["value_coef"], model["max_grad_norm"]
    observations, actions = torch.randn(size, 4), torch.randint(0, 2, (size,))
    old_log_prob = torch.full((size,), -0.69)
    advantages, returns = torch.randn(size), torch.randn(size)
    steps = 0
    started = time.perf_counter()
    for _ in range(rollouts):
        statistics_rows = []
        for _ in range(model["update_epochs"]):
            for rows in torch.randperm(size).split(minibatch):
                log_probs = torch.log_softmax(actor(observations[rows]), dim=-1)
                log_prob = log_probs.gather(1, actions[rows, None])[:, 0]
                entropy = -(log_probs.exp() * log_probs).sum(dim=-1).mean()
                values = critic(observations[rows])[:, 0]
                adv = advantages[rows]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                log_ratio = log_prob - old_log_prob[rows]
                ratio = log_ratio.exp()
                policy_loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
                policy_loss = policy_loss.mean()
                critic_loss = ((values - returns[rows]) ** 2).mean()
                loss = policy_loss + value_coef * critic_loss
                with torch.no_grad():
                    kl = (ratio - 1 - log_ratio).mean()
                    clipped = ((ratio - 1).abs() > clip).float().mean()
                    row = torch.stack([policy_loss, critic_loss, entropy, kl, clipped])
                    statistics_rows.append(row)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(parameters, max_norm)
                optimizer.step()
                steps += 1
        torch.stack(statistics_rows).mean(dim=0).tolist()
    return (time.perf_counter() - started) / steps


def main() -> None:
    if sys.argv[1] == "--raw":
        model, rollouts, fused = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
        print(raw(model, rollouts, fused))
        return
    import yaml

    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    model = yaml.safe_load((project / "configs" / "ppo.yaml").read_text())["model"]
    fused = True  # PPOModule's Adam at full precision, the config's
    rollout_size = model["num_envs"] * model["num_steps"]
    whole_budget = model["total_env_steps"] // rollout_size
    rollouts = int(sys.argv[4]) if len(sys.argv) > 4 else whole_budget
    steps = rollouts * model["update_epochs"] * model["num_minibatches"]
    print(
        f"{rollouts} rollouts of {rollout_size} env steps, {steps} optimizer steps on "
        f"{rollout_size // model['num_minibatches']} samples; Adam fused={fused}",
        flush=True,
    )
    pairs = []
    for repeat in range(repeats):
        mine = ours(project, package, rollouts, rollout_size)
        command = [sys.executable, __file__, "--raw", json.dumps(model), str(rollouts)]
        done = subprocess.run([*command, str(int(fused))], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"raw loop failed:\n{done.stderr[-3000:]}")
        plain = float(done.stdout.strip().splitlines()[-1])
        pairs.append((mine, plain))
        print(
            f"repeat {repeat}: ours {mine * 1e3:.2f} ms, raw {plain * 1e3:.2f} ms a step, "
            f"ratio {mine / plain:.2f}",
            flush=True,
        )
    ratio = statistics.median(mine / plain for mine, plain in pairs)
    ours_ms = statistics.median(mine for mine, _ in pairs) * 1e3
    raw_ms = statistics.median(plain for _, plain in pairs) * 1e3
    print(f"\nmedian: ours {ours_ms:.2f} ms, raw {raw_ms:.2f} ms a step")
    print(f"{'met ' if ratio <= TARGET else 'MISSED'} update ours/raw {ratio:.2f} <= {TARGET}")


if __name__ == "__main__":
    main()
