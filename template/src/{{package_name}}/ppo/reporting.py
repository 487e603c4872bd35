"""The extras of a PPO run, beside what ``PPOModule`` logs itself: a callback that the command
line installs. It evaluates every ``eval_every_env_steps`` (logged as ``eval_return``) and at
the end, writes each process's training episodes to ``episodes.csv`` (``episodes_rank<N>.csv``
beyond rank 0), and gives summary.json its PPO keys. The evaluations so far are its checkpoint
state, so a resumed run reports them."""

import csv
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from .evaluate import evaluate
from .module import WINDOW, PPOModule


class PPOReporting(Callback):
    def __init__(self) -> None:
        self.evaluations: list[tuple[int, float]] = []
        """(env steps, mean return) of every evaluation so far."""
        self.last_eval_returns: list[float] = []
        self.timing = {"update": 0.0, "evaluation": 0.0}
        self._update_started = 0.0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Start afresh (a resumed run then loads its evaluations from the checkpoint)."""
        self.__init__()

    def state_dict(self) -> dict[str, Any]:
        return {"evaluations": self.evaluations}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.evaluations = [tuple(pair) for pair in state_dict.get("evaluations", [])]

    def on_train_batch_start(self, *_: Any) -> None:
        self._update_started = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *_: Any) -> None:
        """After each rollout's update: evaluate if one falls due."""
        self.timing["update"] += time.perf_counter() - self._update_started
        assert isinstance(pl_module, PPOModule) and pl_module.collector is not None
        env_steps, every = pl_module.collector.env_steps, pl_module.hparams.eval_every_env_steps
        before = env_steps - pl_module.rollout_size * trainer.world_size
        if every and env_steps // every > before // every:
            pl_module.log("eval_return", self._evaluate(pl_module, env_steps), on_step=True)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """A last evaluation, unless one just ran; every process's episodes in a CSV."""
        log_dir = Path(trainer.log_dir or trainer.default_root_dir)  # a collective under DDP
        assert isinstance(pl_module, PPOModule)
        if (collector := pl_module.collector) is None:
            return
        if not self.evaluations or self.evaluations[-1][0] != collector.env_steps:
            self._evaluate(pl_module, collector.env_steps)
        log_dir.mkdir(parents=True, exist_ok=True)
        rank, episodes = trainer.global_rank, collector.episodes
        path = log_dir / (f"episodes_rank{rank}.csv" if rank else "episodes.csv")
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["env_step", "seconds", "return", "length"])
            columns = (episodes.env_steps, episodes.seconds, episodes.returns, episodes.lengths)
            writer.writerows(zip(*columns, strict=True))

    def summary_extras(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        """The PPO keys of summary.json. The "solved" keys are always there, null when they do
        not apply (no ``solved_return``, or not reached, or nothing collected)."""
        assert isinstance(pl_module, PPOModule)
        collector, target = pl_module.collector, pl_module.hparams.solved_return
        keys = ("steps_to_solved", "seconds_to_solved", "steps_to_solved_or_penalty")
        extras: dict[str, Any] = {"solved_return": target, **dict.fromkeys(keys)}
        if collector is None:
            return extras
        episodes = collector.episodes
        for i in range(WINDOW - 1, len(episodes.returns)):  # the first whose last WINDOW reach it
            window = episodes.returns[i + 1 - WINDOW : i + 1]
            if target is not None and sum(window) / WINDOW >= target:
                extras["steps_to_solved"] = episodes.env_steps[i]
                extras["seconds_to_solved"] = round(episodes.seconds[i], 3)
                break
        if not self.last_eval_returns:
            return extras
        env_steps, returns = collector.env_steps, self.last_eval_returns
        mean = sum(returns) / len(returns)
        solved = extras["steps_to_solved"]
        budget = max(pl_module.hparams.total_env_steps, env_steps)
        extras["steps_to_solved_or_penalty"] = solve_cost(solved, mean, target, budget)
        elapsed = time.perf_counter() - collector.started
        return {
            "eval_return_mean": mean,
            "eval_return_min": min(returns),
            "eval_episodes": len(returns),
            "env_steps": env_steps,
            "env_steps_per_process": env_steps // trainer.world_size,
            "training_episodes": len(episodes.returns),
            **extras,
            "env_steps_per_second": round((env_steps - collector.first_env_step) / elapsed, 1),
            "time_breakdown_seconds": {
                "env_step": round(collector.env_seconds, 3),
                "policy": round(collector.policy_seconds, 3),
                "update": round(self.timing["update"], 3),
                "evaluation": round(self.timing["evaluation"], 3),
            },
            "evaluations": self.evaluations,
        }

    def _evaluate(self, module: PPOModule, env_steps: int) -> float:
        tick, hp = time.perf_counter(), module.hparams
        self.last_eval_returns = evaluate(module.agent, hp.env_id, hp.eval_episodes, hp.eval_seed)
        mean = sum(self.last_eval_returns) / len(self.last_eval_returns)
        self.evaluations.append((env_steps, mean))
        if module.global_rank == 0:
            print(f"env steps {env_steps}: deterministic eval return {mean:.1f}", flush=True)
        self.timing["evaluation"] += time.perf_counter() - tick
        return mean


def solve_cost(
    steps_to_solved: int | None, eval_return: float, solved_return: float | None, budget: int
) -> float | None:
    """A sweep's objective, ``steps_to_solved_or_penalty``: a solved run's ``steps_to_solved``;
    an unsolved one's ``budget`` plus one, stretched by how far its last evaluation fell
    short of ``solved_return``, so that it ranks below every solved run of that budget."""
    if solved_return is None:
        return None
    if steps_to_solved is not None:
        return float(steps_to_solved)
    shortfall = max(0.0, solved_return - eval_return) / max(abs(solved_return), 1.0)
    return budget * (1.0 + shortfall) + 1.0
