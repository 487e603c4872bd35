"""Deterministic evaluation: run the greedy policy for whole episodes and report returns."""

import gymnasium as gym
import numpy as np
import torch

from .agent import ActorCritic
from .envs import make_vector_env


@torch.no_grad()
def evaluate(agent: ActorCritic, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of ``episodes`` episodes, one per environment, played to their end.

    Each environment runs exactly one episode; after it ends its later steps (a new episode
    begun by autoreset) are not counted.
    """
    device = next(agent.parameters()).device
    envs = make_vector_env(env_id, episodes)
    action_space = envs.single_action_space
    observation, _ = envs.reset(seed=seed)
    totals = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    try:
        while running.any():
            observation = torch.as_tensor(observation, dtype=torch.float32, device=device)
            action = agent.greedy(observation).cpu().numpy()
            if isinstance(action_space, gym.spaces.Box):
                action = np.clip(action, action_space.low, action_space.high)
            observation, reward, terminated, truncated, _ = envs.step(action)
            totals += np.where(running, reward, 0.0)
            running &= ~(terminated | truncated)
    finally:
        envs.close()
    return totals.tolist()
