"""Gymnasium vector environments, with the autoreset behaviour PPO needs stated explicitly.

Gymnasium 1.x's default (``NEXT_STEP``) autoreset spends one ``step`` call per finished
episode on returning the reset observation, with a zero reward and the action ignored:
a fake transition from the final observation to the next episode's first. We ask for
``SAME_STEP`` instead: the step that ends an episode already returns the reset observation,
and the final observation arrives in ``info["final_obs"]``, where the rollout needs it to
bootstrap a truncated episode. No fake transition exists to leak into a loss.
"""

from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

Vectorization = Literal["sync", "async"]


def make_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: Vectorization = "sync",
    max_episode_steps: int | None = None,
) -> VectorEnv:
    """``num_envs`` copies of ``env_id``, stepped together, resetting on the same step.

    ``max_episode_steps`` overrides the registered time limit (truncation).
    """
    if vectorization not in ("sync", "async"):
        raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    env_kwargs: dict[str, Any] = {}
    if max_episode_steps is not None:
        env_kwargs["max_episode_steps"] = max_episode_steps
    envs = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        **env_kwargs,
    )
    observation_space = envs.single_observation_space
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        envs.close()
        raise ValueError(
            f"{env_id}: observations must be flat Box vectors, got {observation_space}"
        )
    action_space = envs.single_action_space
    flat_box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not (isinstance(action_space, gym.spaces.Discrete) or flat_box):
        envs.close()
        raise ValueError(f"{env_id}: actions must be Discrete or a flat Box, got {action_space}")
    return envs


def final_observations(info: dict, rows: np.ndarray) -> np.ndarray:
    """The last observation of each env in ``rows`` whose episode ended on this step."""
    return np.stack([info["final_obs"][row] for row in rows]).astype(np.float32)
