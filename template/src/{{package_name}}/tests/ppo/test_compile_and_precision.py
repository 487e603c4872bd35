"""The PPO agent's networks compiled, checks on: a wrong shape still raises at the compiled
boundary. (A compiled fit: ``test_run_files.py``; bf16 autocast: ``test_ppo.py``.)"""

import gymnasium as gym
import pytest
import torch
from jaxtyping import TypeCheckError

from ...ppo.agent import ActorCritic


def test_compiled_agent_rejects_a_column_observation() -> None:
    torch._dynamo.reset()
    agent = ActorCritic(4, gym.spaces.Discrete(2), (8,))
    agent.compile_networks(backend="aot_eager")
    for _ in range(2):
        assert agent.value(torch.randn(5, 4)).shape == (5,)
        assert agent.sample(torch.randn(5, 4)).shape == (5,)
    with pytest.raises(TypeCheckError):
        agent.value(torch.randn(5, 4, 1))
