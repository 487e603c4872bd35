"""Gymnasium vector environments, with the autoreset behaviour PPO needs stated explicitly,
and a ``UserError`` before training for an environment PPO cannot make or drive.

Gymnasium 1.x's default (``NEXT_STEP``) autoreset spends one ``step`` per finished episode
on returning the reset observation: a fake transition, zero reward and the action ignored.
``SAME_STEP`` returns the reset observation from the step that ends the episode, and the
final one in ``info["final_obs"]``, where a truncated episode's bootstrap needs it."""

import difflib
import importlib
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import find_highest_version, parse_env_id
from gymnasium.vector import AutoresetMode, VectorEnv
from torch import Tensor

from ..run.errors import UserError

Vectorization = Literal["sync", "async"]


def check_env_id(env_id: str) -> None:
    """Raise a :class:`UserError` naming ``env_id`` unless ``gym.make`` would find it: as
    there, ``"module:Name-v0"`` imports ``module``, and no version means the highest one."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise UserError(f"env_id {env_id!r}: cannot import {module!r} ({error})") from error
    try:
        namespace, base, version = parse_env_id(name)
    except gym.error.Error:
        namespace, base, version = None, name, None
    latest = find_highest_version(namespace, base) if version is None else None
    if name in gym.registry or latest is not None:
        return
    known = {registered.lower(): registered for registered in gym.registry}
    close = [known[match] for match in difflib.get_close_matches(name.lower(), list(known), n=3)]
    hint = f"did you mean {', '.join(close)}?" if close else "see gymnasium.pprint_registry()"
    raise UserError(f"env_id {env_id!r} is not a registered gymnasium environment; {hint}")


def make_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: Vectorization = "sync",
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
) -> VectorEnv:
    """``num_envs`` copies of ``env_id``, stepped together, resetting on the same step;
    ``max_episode_steps`` overrides the registered time limit."""
    check_env_id(env_id)
    env_kwargs: dict[str, Any] = {"max_episode_steps": max_episode_steps}
    if render_mode is not None:  # only when asked for: an environment need not take it
        env_kwargs["render_mode"] = render_mode
    autoreset = {"autoreset_mode": AutoresetMode.SAME_STEP}
    try:
        envs = gym.make_vec(env_id, num_envs, vectorization, vector_kwargs=autoreset, **env_kwargs)
    except gym.error.DependencyNotInstalled as error:  # registered, but its package is not
        raise UserError(f"env_id {env_id!r}: {error}") from error
    observation_space, action_space = envs.single_observation_space, envs.single_action_space
    flat_box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        problem = f"observations must be flat Box vectors, got {observation_space}"
    elif not (isinstance(action_space, gym.spaces.Discrete) or flat_box):
        problem = f"actions must be Discrete or a flat Box, got {action_space}"
    else:
        return envs
    envs.close()
    raise UserError(f"env_id {env_id!r}: {problem}")


def to_env(envs: VectorEnv, action: Tensor) -> np.ndarray:
    """``action`` as ``envs`` take it: a Box action clipped to the space's bounds."""
    space, array = envs.single_action_space, action.cpu().numpy()
    return np.clip(array, space.low, space.high) if isinstance(space, gym.spaces.Box) else array
