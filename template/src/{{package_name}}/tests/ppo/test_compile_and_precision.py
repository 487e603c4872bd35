"""The PPO example with ``torch.compile`` and bf16 autocast, checks on: it fits, and a
wrong shape still raises at the compiled networks' boundary. The compiled fit runs in a
child process: compiling costs seconds, and dynamo's caches stay out of pytest's."""

from pathlib import Path

import gymnasium as gym
import pytest
import torch
from jaxtyping import TypeCheckError

from ...ppo.agent import ActorCritic
from ..project import CONFIGS, QUIET, fit_summary
from .test_ppo import _fit

QUICK = [
    "--model.total_env_steps=2048",
    "--model.update_epochs=2",
    "--model.eval_every_env_steps=0",
    "--model.eval_episodes=1",
]


@pytest.mark.slow
def test_compiled_fit_with_checks_on(tmp_path: Path) -> None:
    compiled = ["--model.compile=true", "--model.compile_backend=aot_eager"]
    summary = fit_summary("ppo", CONFIGS / "ppo.yaml", [*QUICK, *QUIET, *compiled], tmp_path)
    assert summary["env_steps"] == 2048


def test_compiled_agent_rejects_a_column_observation() -> None:
    torch._dynamo.reset()
    agent = ActorCritic(4, gym.spaces.Discrete(2), (8,))
    agent.compile_networks(backend="aot_eager")
    for _ in range(2):
        assert agent.value(torch.randn(5, 4)).shape == (5,)
        assert agent.sample(torch.randn(5, 4)).shape == (5,)
    with pytest.raises(TypeCheckError):
        agent.value(torch.randn(5, 4, 1))


@pytest.mark.cli
def test_bf16_mixed_fit_with_checks_on(tmp_path: Path) -> None:
    summary = _fit(tmp_path, *QUICK, "--trainer.precision=bf16-mixed")
    assert summary["env_steps"] == 2048
