"""PPO as a LightningModule: the Trainer runs the loop, the module supplies the data.

Each batch is one fresh rollout, collected by ``train_dataloader``'s stream with the current
policy. The stream has a length, so Lightning does not prefetch: no rollout is collected
with a stale policy. Optimization is manual because one rollout feeds many optimizer steps;
Lightning still owns devices, DDP (``manual_backward`` syncs gradients) and checkpoints.
Each rollout's statistics go to every logger once, at the run's env-step count (every
process's). Evaluations and summary.json's PPO keys are ``reporting.PPOReporting``'s.
"""

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import closing

import gymnasium as gym
import lightning as L
import torch
from lightning.pytorch.core.optimizer import LightningOptimizer
from lightning.pytorch.plugins.precision import MixedPrecision
from lightning.pytorch.utilities.parsing import AttributeDict
from torch.utils.data import DataLoader, IterableDataset

from ..core.policy_gradient import (
    approx_kl,
    clip_fraction,
    clipped_surrogate_loss,
    entropy_bonus,
    normalize_advantages,
    value_loss,
)
from ..core.shapes import Float, Scalar, Tensor, typechecked
from ..run import ranges
from ..run.errors import UserError
from .agent import ActorCritic
from .envs import Vectorization, make_vector_env
from .rollout import RolloutCollector, Samples

STATISTICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
"""The rows of :func:`ppo_loss`'s statistics, under the names they are logged as."""
APPROX_KL = STATISTICS.index("approx_kl")
WINDOW = 20
"""Training episodes in the rolling mean that the logged return and "solved" read."""


@typechecked
def ppo_loss(
    agent: ActorCritic,
    minibatch: Samples,
    clip_coef: float,
    value_clip_coef: float | None,
    value_coef: float,
    entropy_coef: float,
    norm_advantages: bool,
) -> tuple[Scalar, Float[Tensor, " statistic"]]:
    """PPO's loss on one minibatch, and its ``STATISTICS``. Every field of ``minibatch`` meets
    a typed call, so a wrong shape raises even in a record changed after it was built."""
    log_prob, entropy, values = agent.evaluate(minibatch.observations, minibatch.actions)
    advantages = minibatch.advantages
    if norm_advantages:
        advantages = normalize_advantages(advantages)
    policy_loss = clipped_surrogate_loss(log_prob, minibatch.old_log_prob, advantages, clip_coef)
    critic_loss = value_loss(values, minibatch.old_values, minibatch.returns, value_clip_coef)
    entropy_mean = entropy_bonus(entropy)
    loss = policy_loss + value_coef * critic_loss
    if entropy_coef:  # without the bonus, backward skips the entropy (it is only logged)
        loss = loss - entropy_coef * entropy_mean
    with torch.no_grad():
        kl = approx_kl(log_prob, minibatch.old_log_prob)
        clipped = clip_fraction(log_prob, minibatch.old_log_prob, clip_coef)
        statistics = torch.stack([policy_loss, critic_loss, entropy_mean, kl, clipped])
    return loss, statistics


class _RolloutStream(IterableDataset):
    def __init__(self, module: "PPOModule") -> None:
        self.module = module

    def __iter__(self) -> Iterator[Samples]:
        return self.module.rollouts()

    def __len__(self) -> int:  # a length: Lightning does not prefetch
        return self.module.num_rollouts


class PPOModule(L.LightningModule):
    hparams: AttributeDict  # type: ignore[assignment]  # what save_hyperparameters stores

    def __init__(
        self,
        env_id: str = "CartPole-v1",
        num_envs: ranges.PositiveInt = 1,
        vectorization: Vectorization = "sync",
        num_steps: ranges.PositiveInt = 2048,
        total_env_steps: ranges.PositiveInt = 1_000_000,
        learning_rate: ranges.PositiveFloat = 3e-4,
        anneal_lr: bool = False,
        gamma: ranges.ClosedUnitInterval = 0.99,
        gae_lambda: ranges.ClosedUnitInterval = 0.95,
        update_epochs: ranges.PositiveInt = 10,
        num_minibatches: ranges.PositiveInt = 32,
        norm_advantages: bool = True,
        clip_coef: ranges.PositiveFloat = 0.2,
        anneal_clip: bool = False,
        value_clip_coef: ranges.PositiveFloat | None = None,
        entropy_coef: ranges.NonNegativeFloat = 0.0,
        value_coef: ranges.NonNegativeFloat = 0.5,
        max_grad_norm: ranges.PositiveFloat = 0.5,
        target_kl: ranges.PositiveFloat | None = None,
        hidden_sizes: Sequence[ranges.PositiveInt] = (64, 64),
        reward_scale: ranges.PositiveFloat = 1.0,
        eval_every_env_steps: ranges.NonNegativeInt = 25_000,
        eval_episodes: ranges.PositiveInt = 10,
        eval_seed: ranges.NonNegativeInt = 10_000_000,
        solved_return: float | None = None,
        torch_threads: ranges.PositiveInt | None = None,
        compile: bool = False,
        compile_backend: str = "inductor",
    ) -> None:
        """
        Args:
            env_id: Gymnasium id; flat Box observations, Discrete or Box actions.
            num_envs: Environments stepped together.
            vectorization: ``sync`` steps them in this process, ``async`` in subprocesses.
            num_steps: Steps per environment in each rollout.
            total_env_steps: Training budget in env steps, every process's together.
            learning_rate: Adam learning rate at the start.
            anneal_lr: Decay the learning rate linearly to zero over the budget.
            gamma: Discount factor.
            gae_lambda: GAE's bias-variance trade-off (1 = Monte Carlo returns).
            update_epochs: Passes over each rollout.
            num_minibatches: Minibatches per pass.
            norm_advantages: Normalise advantages within each minibatch.
            clip_coef: PPO's ratio clip.
            anneal_clip: Decay the ratio clip linearly to zero over the budget, as RL-Zoo does.
            value_clip_coef: Clip the value update to this distance from the old value.
            entropy_coef: Weight of the entropy bonus.
            value_coef: Weight of the value loss.
            max_grad_norm: Global gradient-norm clip of every optimizer step.
            target_kl: Skip a rollout's remaining epochs once the approx KL of an epoch's last
                minibatch, measured before its step as in CleanRL, exceeds this.
            hidden_sizes: Width of each hidden layer, for the actor and the critic alike.
            reward_scale: Multiplies rewards for learning; logged returns stay unscaled.
            eval_every_env_steps: Deterministic evaluation interval (0: only at the end).
            eval_episodes: Episodes per evaluation.
            eval_seed: Seed of every evaluation's environments; ``ppo.enjoy`` replays with it.
            solved_return: summary.json's ``steps_to_solved`` is the env step at which the
                mean of the last 20 training episodes first reaches it.
            torch_threads: CPU threads; none: ``OMP_NUM_THREADS``, else 1 (run/threads.py).
            compile: Run the actor and critic through ``torch.compile``, shapes still checked.
            compile_backend: ``torch.compile`` backend; ``aot_eager`` starts quickly.
        """
        ranges.check(PPOModule.__init__, locals())
        super().__init__()
        self.save_hyperparameters()  # the flat arguments, for checkpoints and the CLI
        self.automatic_optimization = False
        self.rollout_size = num_envs * num_steps
        if self.rollout_size % num_minibatches:
            raise UserError(
                f"num_envs * num_steps = {self.rollout_size} does not split into "
                f"num_minibatches = {num_minibatches} equal minibatches"
            )
        if total_env_steps < self.rollout_size:
            raise UserError(
                f"total_env_steps = {total_env_steps} is less than one rollout "
                f"(num_envs * num_steps = {self.rollout_size})"
            )
        self.minibatch_size = self.rollout_size // num_minibatches
        self.rollouts_done = 0
        self.resumed_processes: int | None = None
        probe = make_vector_env(env_id, 1)
        size = gym.spaces.flatdim(probe.single_observation_space)
        self.agent = ActorCritic(size, probe.single_action_space, hidden_sizes)  # type: ignore[arg-type]
        probe.close()
        if compile:
            self.agent.compile_networks(backend=compile_backend)
        self.collector: RolloutCollector | None = None

    @property
    def num_rollouts(self) -> int:
        """Rollouts of each process: the budget split over every process's environments."""
        return self.hparams.total_env_steps // (self.rollout_size * self.trainer.world_size)

    def on_fit_start(self) -> None:
        if self.trainer.max_epochs != 1:
            raise UserError(
                f"PPOModule runs its whole budget (total_env_steps) in one epoch; set "
                f"--trainer.max_epochs=1, not {self.trainer.max_epochs}"
            )
        if self.resumed_processes not in (None, self.trainer.world_size):
            raise UserError(
                f"the checkpoint was written by {self.resumed_processes} processes; resume "
                f"it with as many, not {self.trainer.world_size}"
            )
        if self.num_rollouts == 0:
            raise UserError(
                f"total_env_steps = {self.hparams.total_env_steps} is less than one rollout "
                f"on each of {self.trainer.world_size} processes"
            )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_RolloutStream(self), batch_size=None)

    def rollouts(self) -> Iterator[Samples]:
        """Collect the rollouts not done yet, each after the previous one's update. Each
        process seeds its environments, and under DDP its torch generator, by its rank."""
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0)) + 10_000 * self.global_rank
        processes, hp = self.trainer.world_size, self.hparams
        if processes > 1:
            torch.manual_seed(seed)
        with closing(make_vector_env(hp.env_id, hp.num_envs, hp.vectorization)) as envs:
            self.collector = collector = RolloutCollector(
                envs=envs,
                agent=self.agent,
                gamma=hp.gamma,
                gae_lambda=hp.gae_lambda,
                reward_scale=hp.reward_scale,
                seed=seed,
                processes=processes,
                env_steps=self.rollouts_done * self.rollout_size * processes,  # before this fit
            )
            for _ in range(self.rollouts_done, self.num_rollouts):
                yield collector.collect(hp.num_steps).samples()

    def training_step(self, batch: Samples, batch_idx: int) -> None:
        optimizer, collector, hp = self.optimizers(), self.collector, self.hparams
        assert isinstance(optimizer, LightningOptimizer) and collector is not None
        remaining = 1.0 - self.rollouts_done / self.num_rollouts
        if hp.anneal_lr:
            for group in optimizer.param_groups:
                group["lr"] = hp.learning_rate * remaining
        clip_coef = hp.clip_coef * (remaining if hp.anneal_clip else 1.0)
        coefficients = (clip_coef, hp.value_clip_coef, hp.value_coef, hp.entropy_coef)
        statistics = []
        for _ in range(hp.update_epochs):
            for minibatch in self.minibatches(batch):
                loss, row = ppo_loss(self.agent, minibatch, *coefficients, hp.norm_advantages)
                optimizer.zero_grad()
                self.manual_backward(loss)
                self.clip_gradients(optimizer.optimizer, gradient_clip_val=hp.max_grad_norm)
                optimizer.step()
                statistics.append(row)
            if hp.target_kl is not None:
                # Every process must take the same number of steps (each backward is an
                # all-reduce under DDP), so they decide on the KL averaged over processes.
                kl = self.trainer.strategy.reduce(statistics[-1][APPROX_KL], reduce_op="mean")
                if float(kl) > hp.target_kl:
                    break
        self.rollouts_done += 1
        means = torch.stack(statistics).mean(dim=0).tolist()
        metrics: dict[str, float | Tensor] = dict(zip(STATISTICS, means, strict=True))
        metrics["learning_rate"] = optimizer.param_groups[0]["lr"]
        # float64: self.log stores a float as float32, exact only up to 2**24 env steps.
        metrics["step"] = torch.tensor(collector.env_steps, dtype=torch.float64)
        returns = collector.episodes.returns[-WINDOW:]
        lengths = collector.episodes.lengths[-WINDOW:]
        if returns:
            metrics["episodic_return"] = sum(returns) / len(returns)
            metrics["episodic_length"] = sum(lengths) / len(lengths)
        seconds = time.perf_counter() - collector.started
        metrics["sps"] = (collector.env_steps - collector.first_env_step) / seconds
        self.log_dict(metrics, on_step=True)

    def minibatches(self, rollout: Samples) -> Iterator[Samples]:
        """One pass over ``rollout`` in shuffled minibatches. A single minibatch is the
        rollout as it is: its mean loss does not depend on the order of its rows."""
        if self.minibatch_size == self.rollout_size:
            return iter([rollout])
        return map(rollout.select, torch.randperm(self.rollout_size).split(self.minibatch_size))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        # Fused: one kernel for every parameter, not a dozen small ones per tensor (most of
        # Adam's cost on a small network); Lightning refuses it with mixed precision.
        fused = not isinstance(self.trainer.precision_plugin, MixedPrecision)
        return torch.optim.Adam(
            self.parameters(), self.hparams.learning_rate, eps=1e-5, fused=fused
        )

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Lightning restores the weights and the optimizer, this the rollouts done (hence the
        env-step count and the schedules)."""
        state = checkpoint.get("ppo", {})
        self.rollouts_done = state.get("rollouts_done", 0)
        self.resumed_processes = state.get("processes")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["ppo"] = {
            "rollouts_done": self.rollouts_done,
            "processes": self.trainer.world_size,
            "env_steps": self.rollouts_done * self.rollout_size * self.trainer.world_size,
        }

    def on_train_end(self) -> None:
        """Raise unless every process ends with the same parameters, as averaged gradients
        guarantee: a gradient that skipped DDP's all-reduce would part them silently."""
        if self.collector is None or self.trainer.world_size == 1:
            return
        gathered = self.all_gather(torch.nn.utils.parameters_to_vector(self.parameters()))
        assert isinstance(gathered, Tensor)
        if not all(torch.equal(gathered[0], row) for row in gathered):
            raise RuntimeError("the processes ended with different parameters")
