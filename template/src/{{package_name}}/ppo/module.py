"""PPO as a LightningModule: the Trainer runs the loop, the module supplies the data.

Each "batch" the Trainer sees is one fresh rollout: ``train_dataloader`` is a stream that
collects it with the current policy and computes its advantages. ``training_step`` then
reads like the algorithm: ``update_epochs`` passes of shuffled minibatches, each an
optimizer step with global gradient-norm clipping, stopping early past ``target_kl``.
Optimization is manual because one rollout feeds many optimizer steps; Lightning still
owns devices, DDP (``manual_backward`` syncs gradients), checkpoints and logging.

The stream has a length, so Lightning does not prefetch: a rollout is collected only after
the previous update's last optimizer step, never with a stale policy.

Per-rollout statistics go straight to the logger, once per rollout: a ``self.log`` per
optimizer step would cost more than the step itself on a small MLP.

Under DDP each process steps its own environments, seeded by its rank, and DDP averages
the gradients; ``total_env_steps`` and every logged env-step count are the whole run's.
A checkpoint carries the rollouts done, so a resumed run continues the budget and the
learning-rate and clip schedules where they stopped; the environments restart.
"""

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.core.optimizer import LightningOptimizer
from torch.utils.data import DataLoader, IterableDataset

from ..policy_gradient import (
    approx_kl,
    clip_fraction,
    clipped_surrogate_loss,
    entropy_bonus,
    normalize_advantages,
    value_loss,
)
from ..shapes import Tensor
from .agent import ActorCritic
from .envs import Vectorization, make_vector_env
from .evaluate import evaluate
from .rollout import RolloutCollector
from .solved import first_solved

Samples = dict[str, Tensor]
STATISTICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
APPROX_KL = STATISTICS.index("approx_kl")


class _RolloutStream(IterableDataset):
    """Yields the module's rollouts; its length is what turns off Lightning's prefetch."""

    def __init__(self, module: "PPOModule") -> None:
        self.module = module

    def __iter__(self) -> Iterator[Samples]:
        return self.module.rollouts()

    def __len__(self) -> int:
        return self.module.num_rollouts


class PPOModule(L.LightningModule):
    def __init__(
        self,
        env_id: str = "CartPole-v1",
        num_envs: int = 16,
        vectorization: Vectorization = "sync",
        num_steps: int = 64,
        total_env_steps: int = 60_000,
        learning_rate: float = 2e-3,
        anneal_lr: bool = True,
        gamma: float = 0.98,
        gae_lambda: float = 0.8,
        update_epochs: int = 30,
        num_minibatches: int = 1,
        norm_advantages: bool = True,
        clip_coef: float = 0.2,
        anneal_clip: bool = False,
        value_clip_coef: float | None = None,
        entropy_coef: float = 0.0,
        value_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        target_kl: float | None = None,
        hidden_sizes: Sequence[int] = (64, 64),
        reward_scale: float = 1.0,
        eval_every_env_steps: int = 25_000,
        eval_episodes: int = 10,
        torch_threads: int | None = 1,
        compile: bool = False,
        compile_backend: str = "inductor",
    ) -> None:
        """
        Args:
            env_id: Gymnasium id; flat Box observations, Discrete or Box actions.
            num_envs: Environments stepped together.
            vectorization: ``sync`` steps them in this process, ``async`` in subprocesses.
            num_steps: Steps per environment in each rollout.
            total_env_steps: Training budget in environment steps, over every process's
                environments together (under DDP each collects its share).
            learning_rate: Adam learning rate at the start.
            anneal_lr: Decay the learning rate linearly to zero over the budget.
            gamma: Discount factor.
            gae_lambda: GAE's bias-variance trade-off (1 = Monte Carlo returns).
            update_epochs: Passes over each rollout.
            num_minibatches: Minibatches per pass.
            norm_advantages: Normalise advantages within each minibatch.
            clip_coef: PPO's ratio clip.
            anneal_clip: Decay the ratio clip linearly to zero over the budget, as RL-Zoo does.
            value_clip_coef: Clip the value update to this distance from the old value; None
                for a plain squared error.
            entropy_coef: Weight of the entropy bonus.
            value_coef: Weight of the value loss.
            max_grad_norm: Global gradient-norm clip of every optimizer step.
            target_kl: Skip a rollout's remaining epochs once the approx KL of an epoch's last
                minibatch, measured before its step as in CleanRL, exceeds this (so the
                first epoch always runs in full); None never stops early.
            hidden_sizes: Width of each hidden layer, for the actor and the critic alike.
            reward_scale: Multiplies rewards for learning; logged returns stay unscaled.
            eval_every_env_steps: Deterministic evaluation interval (0: only at the end).
            eval_episodes: Episodes per evaluation.
            torch_threads: Intra-op threads for this process: one is fastest for small MLPs
                on a CPU; None leaves PyTorch's default.
            compile: Run the actor and critic networks through ``torch.compile``; their
                shapes stay checked at each compiled boundary.
            compile_backend: ``torch.compile`` backend; ``aot_eager`` skips code generation
                (quick to start, for tests).
        """
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.rollout_size = num_envs * num_steps
        if self.rollout_size % num_minibatches:
            raise ValueError(
                f"num_envs * num_steps = {self.rollout_size} does not split into "
                f"num_minibatches = {num_minibatches} equal minibatches"
            )
        if total_env_steps < self.rollout_size:
            raise ValueError(
                f"total_env_steps = {total_env_steps} is less than one rollout "
                f"(num_envs * num_steps = {self.rollout_size})"
            )
        self.minibatch_size = self.rollout_size // num_minibatches
        self.rollouts_done = 0
        self.resumed_processes: int | None = None
        probe = make_vector_env(env_id, 1)
        observation_space, action_space = probe.single_observation_space, probe.single_action_space
        probe.close()
        self.agent = ActorCritic(int(observation_space.shape[0]), action_space, hidden_sizes)  # type: ignore[index,arg-type]
        if self.agent.discrete:
            # A categorical policy has no log-std: its empty parameter never gets a gradient,
            # and DDP refuses a parameter that wants one and gets none.
            self.agent.log_std.requires_grad_(False)
        if compile:
            self.agent.compile_networks(backend=compile_backend)
        self.collector: RolloutCollector | None = None
        self.evaluations: list[tuple[int, float]] = []
        self.last_eval_returns: list[float] = []
        self.timing = {"update": 0.0, "evaluation": 0.0, "logging": 0.0}

    def setup(self, stage: str) -> None:
        if self.hparams["torch_threads"]:
            torch.set_num_threads(self.hparams["torch_threads"])

    @property
    def num_rollouts(self) -> int:
        """Rollouts of each process: the budget split over every process's environments."""
        return self.hparams["total_env_steps"] // (self.rollout_size * self.trainer.world_size)

    def on_fit_start(self) -> None:
        if self.trainer.max_epochs != 1:
            raise ValueError(
                f"PPOModule runs its whole budget (total_env_steps) in one epoch; set "
                f"--trainer.max_epochs=1, not {self.trainer.max_epochs}"
            )
        if self.resumed_processes not in (None, self.trainer.world_size):
            raise ValueError(
                f"the checkpoint was written by {self.resumed_processes} processes; resume "
                f"it with as many, not {self.trainer.world_size}"
            )
        if self.num_rollouts == 0:
            raise ValueError(
                f"total_env_steps = {self.hparams['total_env_steps']} is less than one rollout "
                f"on each of {self.trainer.world_size} processes"
            )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_RolloutStream(self), batch_size=None)

    def rollouts(self) -> Iterator[Samples]:
        """Collect the rollouts not done yet, each after the previous one's update.

        Each process seeds its environments by its rank; under DDP it also reseeds its torch
        generator, so that the processes sample their actions independently.
        """
        hp = self.hparams
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0)) + 10_000 * self.global_rank
        processes = self.trainer.world_size
        if processes > 1:
            torch.manual_seed(seed)
        envs = make_vector_env(hp["env_id"], hp["num_envs"], hp["vectorization"])
        self.collector = collector = RolloutCollector(
            envs,
            self.agent,
            hp["num_steps"],
            hp["gamma"],
            hp["gae_lambda"],
            hp["reward_scale"],
            seed,
            processes=processes,
            env_steps=self.rollouts_done * self.rollout_size * processes,
        )
        try:
            for _ in range(self.rollouts_done, self.num_rollouts):
                yield collector.collect().samples()
        finally:
            envs.close()

    def training_step(self, batch: Samples, batch_idx: int) -> None:
        tick = time.perf_counter()
        hp = self.hparams
        optimizer = self.optimizers()
        assert isinstance(optimizer, LightningOptimizer)
        remaining = 1.0 - self.rollouts_done / self.num_rollouts
        if hp["anneal_lr"]:
            for group in optimizer.param_groups:
                group["lr"] = hp["learning_rate"] * remaining
        clip_coef = hp["clip_coef"] * (remaining if hp["anneal_clip"] else 1.0)
        statistics = []
        for _ in range(hp["update_epochs"]):
            for rows in torch.randperm(self.rollout_size).split(self.minibatch_size):
                minibatch = {name: values[rows] for name, values in batch.items()}
                loss, minibatch_statistics = self._loss(minibatch, clip_coef)
                optimizer.zero_grad()
                self.manual_backward(loss)
                self.clip_gradients(optimizer.optimizer, gradient_clip_val=hp["max_grad_norm"])
                optimizer.step()
                statistics.append(minibatch_statistics)
            if hp["target_kl"] is not None:
                # Every process must take the same number of steps (each backward is an
                # all-reduce under DDP), so they decide on the KL averaged over processes.
                kl = self.trainer.strategy.reduce(statistics[-1][APPROX_KL], reduce_op="mean")
                if float(kl) > hp["target_kl"]:
                    break
        self.timing["update"] += time.perf_counter() - tick
        self.rollouts_done += 1
        self._end_of_rollout(torch.stack(statistics).mean(dim=0), optimizer.param_groups[0]["lr"])

    def _loss(self, batch: Samples, clip_coef: float) -> tuple[Tensor, Tensor]:
        """PPO's loss on one minibatch, and its statistics (see ``STATISTICS``)."""
        hp = self.hparams
        log_prob, entropy, values = self.agent.evaluate(batch["observation"], batch["action"])
        advantages = batch["advantage"]
        if hp["norm_advantages"]:
            advantages = normalize_advantages(advantages)
        old_log_prob = batch["log_prob"]
        policy_loss = clipped_surrogate_loss(log_prob, old_log_prob, advantages, clip_coef)
        critic_loss = value_loss(values, batch["value"], batch["return"], hp["value_clip_coef"])
        entropy_mean = entropy_bonus(entropy)
        loss = policy_loss + hp["value_coef"] * critic_loss - hp["entropy_coef"] * entropy_mean
        with torch.no_grad():
            kl = approx_kl(log_prob, old_log_prob)
            clipped = clip_fraction(log_prob, old_log_prob, clip_coef)
            statistics = torch.stack([policy_loss, critic_loss, entropy_mean, kl, clipped])
        return loss, statistics

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams["learning_rate"], eps=1e-5)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resume the budget: Lightning restores the weights and the optimizer, this the
        rollouts done (hence the env-step count and the schedules) and the evaluations."""
        state = checkpoint.get("ppo", {})
        self.rollouts_done = state.get("rollouts_done", 0)
        self.evaluations = [tuple(pair) for pair in state.get("evaluations", [])]
        self.resumed_processes = state.get("processes")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["ppo"] = {
            "rollouts_done": self.rollouts_done,
            "processes": self.trainer.world_size,
            "env_steps": self.rollouts_done * self.rollout_size * self.trainer.world_size,
            "evaluations": self.evaluations,
        }

    def on_train_end(self) -> None:
        """A last deterministic evaluation; every process's training episodes in a CSV
        (``episodes.csv`` from the first, ``episodes_rank<N>.csv`` from the others)."""
        log_dir = Path(self.trainer.log_dir or self.trainer.default_root_dir)  # collective
        if self.collector is None:
            return
        if self.trainer.world_size > 1:
            self._check_processes_agree()
        env_steps = self.collector.env_steps
        if not self.evaluations or self.evaluations[-1][0] != env_steps:
            self._evaluate(env_steps)
        log_dir.mkdir(parents=True, exist_ok=True)
        name = f"episodes_rank{self.global_rank}.csv" if self.global_rank else "episodes.csv"
        self.collector.episodes.write_csv(log_dir / name)

    def _check_processes_agree(self) -> None:
        """Raise unless every process ends with the same parameters, as averaged gradients
        guarantee: a gradient that skipped DDP's all-reduce would part them silently."""
        gathered = self.all_gather(torch.nn.utils.parameters_to_vector(self.parameters()))
        assert isinstance(gathered, Tensor)
        if not all(torch.equal(gathered[0], row) for row in gathered):
            raise RuntimeError("the processes ended with different parameters")

    def summary_extras(self) -> dict[str, object]:
        """What ``RunSummary`` adds to summary.json for this module."""
        collector = self.collector
        if collector is None or not self.last_eval_returns:
            return {}
        env_steps = collector.env_steps
        episodes = collector.episodes
        solved = first_solved(episodes.returns, threshold=475.0, window=20)
        elapsed = time.perf_counter() - collector.started
        returns = self.last_eval_returns
        return {
            "eval_return_mean": sum(returns) / len(returns),
            "eval_return_min": min(returns),
            "eval_episodes": len(returns),
            "env_steps": env_steps,
            "env_steps_per_process": env_steps // self.trainer.world_size,
            "training_episodes": len(episodes.returns),
            "steps_to_475": None if solved is None else episodes.env_steps[solved],
            "seconds_to_475": None if solved is None else round(episodes.seconds[solved], 3),
            "env_steps_per_second": round((env_steps - collector.first_env_step) / elapsed, 1),
            "time_breakdown_seconds": {
                "env_step": round(collector.env_seconds, 3),
                "policy": round(collector.policy_seconds, 3),
                "update": round(self.timing["update"], 3),
                "evaluation": round(self.timing["evaluation"], 3),
                "logging": round(self.timing["logging"], 3),
            },
            "evaluations": self.evaluations,
        }

    def _evaluate(self, env_steps: int) -> float:
        tick = time.perf_counter()
        self.last_eval_returns = evaluate(
            self.agent, self.hparams["env_id"], self.hparams["eval_episodes"], seed=10_000_000
        )
        mean = sum(self.last_eval_returns) / len(self.last_eval_returns)
        self.evaluations.append((env_steps, mean))
        if self.global_rank == 0:
            print(f"env steps {env_steps}: deterministic eval return {mean:.1f}", flush=True)
        self.timing["evaluation"] += time.perf_counter() - tick
        return mean

    def _end_of_rollout(self, statistics: Tensor, learning_rate: float) -> None:
        collector = self.collector
        assert collector is not None
        world = self.trainer.world_size
        env_steps = collector.env_steps
        metrics: dict[str, float] = dict(zip(STATISTICS, statistics.tolist(), strict=True))
        every = self.hparams["eval_every_env_steps"]
        if every and env_steps // every > (env_steps - self.rollout_size * world) // every:
            metrics["eval_return"] = self._evaluate(env_steps)
        tick = time.perf_counter()
        recent = collector.episodes.returns[-20:]
        if recent:
            lengths = collector.episodes.lengths[-20:]
            metrics["episodic_return"] = sum(recent) / len(recent)
            metrics["episodic_length"] = sum(lengths) / len(lengths)
        metrics["learning_rate"] = learning_rate
        elapsed = time.perf_counter() - collector.started
        metrics["sps"] = (env_steps - collector.first_env_step) / elapsed
        if self.logger is not None:
            self.logger.log_metrics(metrics, step=env_steps)
        self.timing["logging"] += time.perf_counter() - tick
