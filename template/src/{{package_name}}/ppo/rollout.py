"""Collect a fixed-length rollout from vector environments and turn it into training data.

Each step records the observation the action was chosen from, so with ``SAME_STEP``
autoreset every stored row is a real transition. ``next_values[t]`` is the value of what
followed step ``t``: the next stored observation, or for a truncated episode its final one."""

import time
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from einops import rearrange
from gymnasium.vector import VectorEnv

from ..core.policy_gradient import gae
from ..core.shapes import Bool, Float, Int, Tensor, typechecked
from .agent import Action, ActorCritic
from .envs import to_env


@typechecked
@dataclass
class Samples:
    """Training samples, one row per env step: a rollout's, or a minibatch of its rows. Checked
    when built. Not frozen: Lightning's device transfer sets a dataclass's fields, so the loss
    checks every field again through its typed objectives."""

    observations: Float[Tensor, "batch feature"]
    actions: Action
    old_log_prob: Float[Tensor, " batch"]
    old_values: Float[Tensor, " batch"]
    advantages: Float[Tensor, " batch"]
    returns: Float[Tensor, " batch"]
    """What the critic regresses to: advantages plus old values."""

    def select(self, rows: Int[Tensor, " batch"]) -> "Samples":
        return Samples(**{column.name: getattr(self, column.name)[rows] for column in fields(self)})


@typechecked
@dataclass(frozen=True)
class Rollout:
    """One rollout, time-major, with its advantages and critic targets; checked when built."""

    observations: Float[Tensor, "time env feature"]
    actions: Int[Tensor, "time env"] | Float[Tensor, "time env action"]
    log_probs: Float[Tensor, "time env"]
    values: Float[Tensor, "time env"]
    next_values: Float[Tensor, "time env"]
    rewards: Float[Tensor, "time env"]
    terminated: Bool[Tensor, "time env"]
    truncated: Bool[Tensor, "time env"]
    advantages: Float[Tensor, "time env"]
    returns: Float[Tensor, "time env"]

    def samples(self) -> Samples:
        """Training samples: one row per (time, env), the only order minibatches need."""
        flat = "time env ... -> (time env) ..."
        return Samples(
            observations=rearrange(self.observations, flat),
            actions=rearrange(self.actions, flat),
            old_log_prob=rearrange(self.log_probs, flat),
            old_values=rearrange(self.values, flat),
            advantages=rearrange(self.advantages, flat),
            returns=rearrange(self.returns, flat),
        )


@dataclass
class Episodes:
    """Finished training episodes: the env step and second at their end, return, length."""

    env_steps: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)


@dataclass(eq=False, kw_only=True)
class RolloutCollector:
    """Steps ``envs`` with ``agent`` and keeps the episode bookkeeping between rollouts;
    ``processes`` collect in lockstep (DDP), and a resumed run's count starts at ``env_steps``."""

    envs: VectorEnv
    agent: ActorCritic
    gamma: float
    gae_lambda: float
    reward_scale: float
    seed: int
    processes: int = 1
    env_steps: int = 0

    def __post_init__(self) -> None:
        self.device = next(self.agent.parameters()).device
        self.observation = self._tensor(self.envs.reset(seed=self.seed)[0])
        self.episode_return = np.zeros(self.envs.num_envs)
        self.episode_length = np.zeros(self.envs.num_envs, dtype=np.int64)
        self.episodes = Episodes()
        self.first_env_step = self.env_steps
        self.env_seconds = self.policy_seconds = 0.0
        self.started = time.perf_counter()

    def _tensor(self, array: np.ndarray) -> Tensor:
        return torch.as_tensor(array, dtype=torch.float32, device=self.device)

    @torch.no_grad()
    def collect(self, num_steps: int) -> Rollout:
        """Step every environment ``num_steps`` times, then score the rollout in one batch:
        only sampling needs the policy step by step."""
        steps = []  # (observation, action, reward, terminated, truncated) of each step
        cuts = []  # (step, env, final observation) of each truncated episode's end
        for t in range(num_steps):
            tick = time.perf_counter()
            action = self.agent.sample(self.observation)
            tock = time.perf_counter()
            observation, reward, term, trunc, info = self.envs.step(to_env(self.envs, action))
            self.env_seconds += time.perf_counter() - tock
            self.policy_seconds += tock - tick
            cuts += [(t, int(row), info["final_obs"][row]) for row in np.flatnonzero(trunc & ~term)]
            steps.append((self.observation, action, reward, term, trunc))
            done = term | trunc  # the bookkeeping of every finished episode
            self.env_steps += self.envs.num_envs * self.processes
            self.episode_return += reward
            self.episode_length += 1
            for row in np.flatnonzero(done):
                self.episodes.env_steps.append(self.env_steps)
                self.episodes.seconds.append(time.perf_counter() - self.started)
                self.episodes.returns.append(float(self.episode_return[row]))
                self.episodes.lengths.append(int(self.episode_length[row]))
            self.episode_return[done] = 0.0
            self.episode_length[done] = 0
            self.observation = self._tensor(observation)

        tick = time.perf_counter()
        observations, actions, rewards, terminated, truncated = zip(*steps, strict=True)
        visited, taken = torch.stack(observations), torch.stack(actions)
        flat = "time env ... -> (time env) ..."
        log_probs, _, values = self.agent.evaluate(rearrange(visited, flat), rearrange(taken, flat))
        unflat = "(time env) -> time env"
        log_probs = rearrange(log_probs, unflat, env=self.envs.num_envs)
        values = rearrange(values, unflat, env=self.envs.num_envs)
        bootstrap = rearrange(self.agent.value(self.observation), "env -> 1 env")
        next_values = torch.cat([values[1:], bootstrap])
        if cuts:
            cut_steps, cut_envs, finals = zip(*cuts, strict=True)
            time_index, env_index = torch.tensor([cut_steps, cut_envs], device=self.device)
            next_values[time_index, env_index] = self.agent.value(self._tensor(np.stack(finals)))
        rewards = self._tensor(np.stack(rewards) * self.reward_scale)
        terminated = torch.as_tensor(np.stack(terminated), device=self.device)
        truncated = torch.as_tensor(np.stack(truncated), device=self.device)
        advantages, returns = gae(
            rewards, values, next_values, terminated, truncated, self.gamma, self.gae_lambda
        )
        self.policy_seconds += time.perf_counter() - tick
        return Rollout(
            observations=visited,
            actions=taken,
            log_probs=log_probs,
            values=values,
            next_values=next_values,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            advantages=advantages,
            returns=returns,
        )
