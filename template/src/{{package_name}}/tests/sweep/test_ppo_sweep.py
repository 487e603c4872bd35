"""Sweeps of the PPO example: one number that prefers solving in fewer env steps, and a
small study whose trials report every evaluation to the pruner."""

import json
from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState

from ...ppo.reporting import solve_cost
from ...sweep.__main__ import main as sweep_main
from ..project import CONFIGS


def _cost(steps_to_solved: int | None, eval_return: float, solved_return: float) -> float:
    value = solve_cost(steps_to_solved, eval_return, solved_return, budget=10_000)
    assert value is not None
    return value


def test_solve_cost_ranks_solved_by_steps_and_unsolved_by_final_return() -> None:
    fast, slow = _cost(2_000, 480.0, 475.0), _cost(9_000, 200.0, 475.0)
    near, far = _cost(None, 470.0, 475.0), _cost(None, 20.0, 475.0)
    assert fast == 2_000 and slow == 9_000
    assert fast < slow < 10_000 < near < far
    # A negative threshold (Pendulum) and an unsolved return above it still count as unsolved.
    assert 10_000 < _cost(None, -150.0, -200.0) < _cost(None, -900.0, -200.0)
    assert solve_cost(None, 20.0, None, budget=10_000) is None


@pytest.mark.cli
def test_sweep_of_three_trials_minimises_steps_to_solved_and_reports_each_evaluation(
    tmp_path: Path,
) -> None:
    document = {
        "objective": {"key": "steps_to_solved_or_penalty", "direction": "minimize"},
        "parameters": {
            "model.learning_rate": {"type": "float", "low": 1.0e-3, "high": 1.0e-2, "log": True},
            "model.hidden_sizes": {"type": "categorical", "choices": [[16], [32, 32]]},
        },
    }
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(document))
    tiny = ["--model.num_envs=4", "--model.num_steps=32", "--model.total_env_steps=256"]
    tiny += ["--model.eval_every_env_steps=128", "--model.eval_episodes=2"]
    tiny += ["--model.update_epochs=2", "--trainer.enable_model_summary=false"]
    args = ["ppo", f"--space={space}", "--trials=3", f"--config={CONFIGS / 'ppo.yaml'}"]
    study = sweep_main([*args, f"--root={tmp_path}", "--study=cartpole", "--", *tiny])

    folder = tmp_path / "cartpole"
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    for past in study.trials:
        (path,) = (folder / f"trial_{past.number}").rglob("summary.json")
        summary = json.loads(path.read_text())
        assert summary["steps_to_solved_or_penalty"] == past.value
        assert sorted(past.intermediate_values) == [128, 256]  # each evaluation, in env steps
    assert (folder / "best.yaml").is_file() and (folder / "history.png").is_file()
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["model"]["total_env_steps"] == 256
