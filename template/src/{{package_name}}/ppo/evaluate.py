"""Evaluation: the returns of whole episodes of the greedy policy, which training evaluates,
or of the sampled one, which collected the training data (``ppo.enjoy`` plays both)."""

import numpy as np
import torch

from .agent import ActorCritic
from .envs import make_vector_env, to_env


@torch.no_grad()
def evaluate(
    agent: ActorCritic,
    env_id: str,
    episodes: int,
    seed: int,
    deterministic: bool = True,
    frames: list[np.ndarray] | None = None,
) -> list[float]:
    """Returns of ``episodes`` episodes, one per environment, each played to its end (not into
    the next, which autoreset begins). Given ``frames``, the first environment's episode is
    drawn into it, an RGB image per step but the last, which autoreset has already replaced."""
    device = next(agent.parameters()).device
    envs = make_vector_env(env_id, episodes, render_mode=None if frames is None else "rgb_array")
    observation, _ = envs.reset(seed=seed)
    totals, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    try:
        while running.any():
            if frames is not None and running[0]:
                frames.append(envs.render()[0])  # type: ignore[index]
            observation = torch.as_tensor(observation, dtype=torch.float32, device=device)
            action = (agent.greedy if deterministic else agent.sample)(observation)
            observation, reward, terminated, truncated, _ = envs.step(to_env(envs, action))
            totals += np.where(running, reward, 0.0)
            running &= ~(terminated | truncated)
    finally:
        envs.close()
    return totals.tolist()
