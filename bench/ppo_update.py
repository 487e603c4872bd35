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
  random rollout of the config's size, minibatches as ``PPOModule`` takes them; per
  rollout, the statistics' means go to Python as ours do.
- Floor: the raw loop's update run by Lightning's ``Trainer(barebones=True)`` with manual
  optimization, through the same calls ``PPOModule`` makes (``zero_grad``,
  ``manual_backward``, ``clip_gradients``, ``step``) and nothing else of ours: what
  Lightning's manual-optimization path costs a step.

The three take turns, one process each, so that a shared machine's slow phases fall on
each; the target (at most 1.3) is judged on the median of each repeat's ratio.
Usage: ``python bench/ppo_update.py PROJECT_DIR PACKAGE [REPEATS [ROLLOUTS]]`` (5 repeats).
"""

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness

TARGET = 1.3


def ours(project: Path, package: str, rollouts: int, rollout_size: int) -> float:
    """Seconds per optimizer step of a real ``fit``."""
    with tempfile.TemporaryDirectory() as root:
        summary = harness.fit(
            project,
            package,
            "ppo",
            Path(root),
            f"--model.total_env_steps={rollouts * rollout_size}",
            "--model.eval_every_env_steps=0",
        )
    return summary["time_breakdown_seconds"]["update"] / summary["global_step"]


def _setup(model: dict, fused: bool):
    """The two networks, their Adam, and a random rollout of the config's size."""
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
    size = model["num_envs"] * model["num_steps"]
    rollout = {
        "observations": torch.randn(size, 4),
        "actions": torch.randint(0, 2, (size,)),
        "old_log_prob": torch.full((size,), -0.69),
        "advantages": torch.randn(size),
        "returns": torch.randn(size),
    }
    return actor, critic, rollout


def _minibatches(size: int, minibatch: int):
    """Each pass's rows, as ``PPOModule.minibatches`` takes them: shuffled minibatches, or
    the whole rollout as it is when one minibatch holds it."""
    import torch

    if minibatch == size:
        return [slice(None)]
    return torch.randperm(size).split(minibatch)


def _loss(model: dict, actor, critic, rollout: dict, rows):
    """The clipped surrogate plus half the squared value error, and the statistics."""
    import torch

    clip, value_coef = model["clip_coef"], model["value_coef"]
    observations = rollout["observations"][rows]
    log_probs = torch.log_softmax(actor(observations), dim=-1)
    log_prob = log_probs.gather(1, rollout["actions"][rows, None])[:, 0]
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1).mean()
    values = critic(observations)[:, 0]
    adv = rollout["advantages"][rows]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    log_ratio = log_prob - rollout["old_log_prob"][rows]
    ratio = log_ratio.exp()
    policy_loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    critic_loss = ((values - rollout["returns"][rows]) ** 2).mean()
    with torch.no_grad():
        kl = (ratio - 1 - log_ratio).mean()
        clipped = ((ratio - 1).abs() > clip).float().mean()
        row = torch.stack([policy_loss, critic_loss, entropy, kl, clipped])
    return policy_loss + value_coef * critic_loss, row


def raw(model: dict, rollouts: int, fused: bool) -> float:
    """Seconds per optimizer step of the plain loop (run in a child process by ``main``)."""
    import torch
    from torch import nn

    actor, critic, rollout = _setup(model, fused)
    parameters = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=model["learning_rate"], eps=1e-5, fused=fused)
    size = len(rollout["returns"])
    minibatch = size // model["num_minibatches"]
    steps = 0
    started = time.perf_counter()
    for _ in range(rollouts):
        statistics_rows = []
        for _ in range(model["update_epochs"]):
            for rows in _minibatches(size, minibatch):
                loss, row = _loss(model, actor, critic, rollout, rows)
                statistics_rows.append(row)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(parameters, model["max_grad_norm"])
                optimizer.step()
                steps += 1
        torch.stack(statistics_rows).mean(dim=0).tolist()
    return (time.perf_counter() - started) / steps


def floor(model: dict, rollouts: int, fused: bool) -> float:
    """The raw loop's update run by Lightning's ``Trainer(barebones=True)`` with manual
    optimization, as ``PPOModule`` runs it: ``optimizer.zero_grad``, ``manual_backward``,
    ``clip_gradients`` and ``optimizer.step`` through Lightning, one rollout a batch, no
    callback, logger, checkpoint or check. Its ratio to the raw step is what Lightning's
    manual-optimization path costs."""
    import lightning as L
    import torch

    actor, critic, rollout = _setup(model, fused)
    size = len(rollout["returns"])
    minibatch = size // model["num_minibatches"]

    class Floor(harness.TrainClock, L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.actor, self.critic = actor, critic
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            optimizer = self.optimizers()
            statistics_rows = []
            for _ in range(model["update_epochs"]):
                for rows in _minibatches(size, minibatch):
                    loss, row = _loss(model, self.actor, self.critic, rollout, rows)
                    statistics_rows.append(row)
                    optimizer.zero_grad()
                    self.manual_backward(loss)
                    self.clip_gradients(optimizer, gradient_clip_val=model["max_grad_norm"])
                    optimizer.step()
            torch.stack(statistics_rows).mean(dim=0).tolist()

        def configure_optimizers(self):
            return torch.optim.Adam(
                self.parameters(), lr=model["learning_rate"], eps=1e-5, fused=fused
            )

    module = Floor()
    trainer = L.Trainer(barebones=True, max_epochs=1, accelerator="cpu", devices=1)
    trainer.fit(module, range(rollouts))  # one batch a rollout (a list would be one batch)
    steps = rollouts * model["update_epochs"] * model["num_minibatches"]
    assert trainer.global_step == steps, f"the floor took {trainer.global_step} steps, not {steps}"
    return module.seconds / steps


def main() -> None:
    if sys.argv[1] in ("--raw", "--floor"):
        model, rollouts, fused = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
        print((raw if sys.argv[1] == "--raw" else floor)(model, rollouts, fused))
        return
    import yaml

    result = harness.Result("update")
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

    def child(side: str) -> float:
        command = [__file__, f"--{side}", json.dumps(model), str(rollouts), str(int(fused))]
        return harness.worker(command, what=f"{side} loop")

    def measure(side: str, repeat: int) -> float:
        return ours(project, package, rollouts, rollout_size) if side == "ours" else child(side)

    sides = ["ours", "raw", "floor"]
    results: dict[str, list[float]] = {}
    for repeat, results in harness.turns(sides, repeats, measure):
        plain = results["raw"][-1]
        print(
            f"repeat {repeat}: ours {results['ours'][-1] * 1e3:.2f} ms, raw {plain * 1e3:.2f} "
            f"ms, floor {results['floor'][-1] * 1e3:.2f} ms a step; ratio ours "
            f"{results['ours'][-1] / plain:.2f}, floor {results['floor'][-1] / plain:.2f}",
            flush=True,
        )

    def ratio(side: str) -> float:
        return harness.paired(results[side], results["raw"])

    def ms(side: str) -> float:
        return statistics.median(results[side]) * 1e3

    medians = ", ".join(f"{side} {ms(side):.2f} ms" for side in sides)
    print(f"\nmedian: {medians} a step")
    print(
        f"{'met ' if ratio('ours') <= TARGET else 'MISSED'} update ours/raw {ratio('ours'):.2f} "
        f"<= {TARGET}; Lightning's manual-optimization floor/raw {ratio('floor'):.2f}"
    )
    figures = [harness.figure(side, ms(side), "ms/step") for side in sides]
    figures += [
        harness.figure("ours / raw", ratio("ours"), at_most=TARGET),
        harness.figure("floor / raw", ratio("floor")),
    ]
    details = {"rollouts": rollouts, "optimizer_steps": steps, "seconds_per_step": results}
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
