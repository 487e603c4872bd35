"""The PPO example with ``torch.compile`` and bf16 autocast, checks on: it fits, and a
wrong shape still raises at the compiled networks' boundary."""

import json
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from jaxtyping import TypeCheckError

from ...ppo.__main__ import main
from ...ppo.agent import ActorCritic

CONFIG = Path(__file__).resolve().parents[4] / "configs" / "ppo.yaml"
QUICK = [
    "--model.total_env_steps=2048",
    "--model.update_epochs=2",
    "--model.eval_every_env_steps=0",
    "--model.eval_episodes=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]


def _fit(root: Path, *extra: str) -> dict:
    main(["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={root}", *QUICK, *extra])
    (summary_path,) = root.rglob("summary.json")
    return json.loads(summary_path.read_text())


def test_compiled_fit_with_checks_on(tmp_path: Path) -> None:
    torch._dynamo.reset()
    summary = _fit(tmp_path, "--model.compile=true", "--model.compile_backend=aot_eager")
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


def test_bf16_mixed_fit_with_checks_on(tmp_path: Path) -> None:
    summary = _fit(tmp_path, "--trainer.precision=bf16-mixed")
    assert summary["env_steps"] == 2048
