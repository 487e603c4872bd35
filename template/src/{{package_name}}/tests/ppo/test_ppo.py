"""The PPO example end to end: the CLI, autoreset handling, summary.json, and column
advantages injected into a real training run."""

import csv
import inspect
import json
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
import yaml
from einops import rearrange
from jaxtyping import TypeCheckError
from lightning.pytorch.loggers import CSVLogger

from ...core.broadcast import BroadcastError
from ...core.policy_gradient import clipped_surrogate_loss
from ...core.shapes import checks_disabled
from ...ppo import PPOModule, PPOReporting
from ...ppo import __main__ as ppo_main
from ...ppo import module as ppo_module
from ...ppo.agent import ActorCritic
from ...ppo.envs import make_vector_env
from ...ppo.rollout import Episodes, RolloutCollector
from ...run.guards import BroadcastGuardCallback
from ..project import CONFIGS, QUIET, quiet_trainer

SOLVED = ("solved_return", "steps_to_solved", "seconds_to_solved")  # summary.json's keys


def _fit(root: Path, *extra: str, config: str = "ppo.yaml") -> dict:
    fit = ["fit", "--config", str(CONFIGS / config), f"--trainer.default_root_dir={root}"]
    ppo_main.main([*fit, *QUIET, *extra])
    (summary_path,) = root.rglob("summary.json")
    return json.loads(summary_path.read_text())


def _collector(num_envs: int, max_episode_steps: int | None = None) -> RolloutCollector:
    envs = make_vector_env("CartPole-v1", num_envs, max_episode_steps=max_episode_steps)
    agent = ActorCritic(4, envs.single_action_space)  # type: ignore[arg-type]
    return RolloutCollector(
        envs=envs, agent=agent, gamma=0.99, gae_lambda=0.95, reward_scale=1.0, seed=0
    )


@pytest.mark.cli
def test_optional_details_run_and_stop_early_past_target_kl(tmp_path: Path) -> None:
    details = ["--model.value_clip_coef=0.2", "--model.anneal_clip=true", "--model.target_kl=1e-9"]
    details += ["--model.entropy_coef=0.01", "--model.solved_return=15"]
    summary = _fit(tmp_path, "--model.total_env_steps=2048", *details)  # evaluated at the end
    # The KL is measured in each minibatch's forward pass, before its step, as in CleanRL:
    # the first epoch sees the unchanged policy (KL 0), the second a moved one. With a
    # target of ~0 each of the 2 rollouts (16 envs x 64 steps) stops after 2 of its epochs.
    assert summary["global_step"] == 2 * 2
    # An untrained CartPole policy's episodes last about 20 steps: a mean of 15 is reached
    # within the first rollouts, 475 never.
    assert summary["solved_return"] == 15
    assert 0 < summary["steps_to_solved"] <= 2048 and summary["seconds_to_solved"] > 0


@pytest.mark.cli
def test_short_bf16_fit_writes_the_summary_and_a_weights_only_checkpoint(tmp_path: Path) -> None:
    budget = ["--model.total_env_steps=3072", "--model.eval_every_env_steps=1024"]
    summary = _fit(tmp_path, *budget, "--model.update_epochs=1", "--trainer.precision=bf16-mixed")
    assert {"eval_return_mean", "env_steps", "train_seconds", *SOLVED} <= summary.keys()
    assert (summary["solved_return"], summary["env_steps"]) == (475, 3072)
    assert summary["eval_episodes"] >= 10
    # Built-in types only: it loads weights_only (its state: test_ppo_ddp.py's resume test).
    last = tmp_path / "checkpoints" / "last.ckpt"
    loaded = PPOModule.load_from_checkpoint(last, weights_only=True).hparams
    assert (loaded.learning_rate, loaded.gamma, loaded.update_epochs) == (0.015, 0.99, 1)
    assert (loaded.solved_return, loaded.hidden_sizes) == (475, [64, 64])


def test_steps_to_solved_is_read_off_the_rolling_20_episode_mean() -> None:
    module = PPOModule(solved_return=100.0)
    module.collector = _collector(num_envs=1)
    # Ten episodes return 50, then every one 500. The 20-episode mean first reaches 100 at
    # the 20th episode (mean 275; fewer than 20 never count).
    counts = range(1, 41)
    steps, seconds = [10 * count for count in counts], [0.5 * count for count in counts]
    returns = [50.0] * 10 + [500.0] * 30
    module.collector.episodes = Episodes(steps, seconds, returns, lengths=[1] * 40)
    extras = PPOReporting().summary_extras(L.Trainer(logger=False), module)
    solved = {"solved_return": 100.0, "steps_to_solved": 200, "seconds_to_solved": 10.0}
    assert extras == {**solved, "steps_to_solved_or_penalty": None}  # no evaluation yet


@pytest.mark.parametrize("config", ["ppo.yaml", "pendulum.yaml"])
def test_each_config_sets_every_hyperparameter(config: str) -> None:
    """The class defaults are the generic PPO ones: a tuning that left a value to them
    would change whenever they do. Only the machine settings may be left out."""
    machine = {"torch_threads", "compile", "compile_backend"}
    arguments = set(inspect.signature(PPOModule).parameters) - machine
    model = yaml.safe_load((CONFIGS / config).read_text())["model"]
    assert sorted(arguments - model.keys()) == []


def test_rollouts_hold_no_fake_transition_at_autoreset() -> None:
    # An untrained CartPole policy ends an episode every ~20 steps. With gymnasium's
    # default autoreset, the step after each end would be a fake transition with reward 0.
    collector = _collector(num_envs=4)
    rollout = collector.collect(num_steps=128)
    assert rollout.terminated.sum() >= 8
    assert torch.all(rollout.rewards == 1.0)
    assert len(collector.episodes.returns) == int(rollout.terminated.sum())


def test_truncation_bootstraps_from_the_final_observation() -> None:
    rollout = _collector(num_envs=2, max_episode_steps=5).collect(num_steps=12)
    cut = rollout.truncated & ~rollout.terminated
    assert cut.any()
    ongoing = ~(rollout.terminated | rollout.truncated)[:-1]
    # Mid-episode, next_values[t] is the value of the next stored observation...
    torch.testing.assert_close(rollout.next_values[:-1][ongoing], rollout.values[1:][ongoing])
    # ...but after a truncation it is the value of the final observation, not of the reset
    # one stored next, and the advantage does not flow across the boundary.
    assert not torch.allclose(rollout.next_values[:-1][cut[:-1]], rollout.values[1:][cut[:-1]])
    assert torch.all(rollout.next_values[cut] != 0)


@pytest.mark.cli
@pytest.mark.parametrize("vectorization", ["sync", pytest.param("async", marks=pytest.mark.slow)])
def test_pendulum_config_runs_under_fast_dev_run(tmp_path: Path, vectorization: str) -> None:
    options = ["--trainer.fast_dev_run=true", f"--model.vectorization={vectorization}"]
    summary = _fit(tmp_path, *options, config="pendulum.yaml")
    assert summary["env_steps"] == 8 * 256  # one rollout, evaluated at its end
    assert summary["eval_return_mean"] < 0  # Pendulum's rewards are costs
    assert {key: summary[key] for key in SOLVED} == dict.fromkeys(SOLVED)  # no threshold: null


def _column_advantages(log_prob, old_log_prob, advantages, clip_coef):
    """The bug under test: advantages reach the loss as (N, 1), against (N,) log-probs."""
    column = rearrange(advantages, "batch -> batch 1")
    return clipped_surrogate_loss(log_prob, old_log_prob, column, clip_coef)


@pytest.mark.cli
def test_column_advantages_raise_inside_training(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ppo_module, "clipped_surrogate_loss", _column_advantages)
    with pytest.raises(TypeCheckError, match="advantages"):
        _fit(tmp_path, "--model.total_env_steps=1024")


@pytest.mark.cli
def test_unchecked_column_advantages_are_still_caught_by_the_broadcast_guard(
    tmp_path: Path, monkeypatch
) -> None:
    """With annotations off, the example's BroadcastGuardCallback still stops the run in
    its first rollout: the (N, 1) advantages times (N,) ratios stretch both operands."""
    monkeypatch.setattr(ppo_module, "clipped_surrogate_loss", _column_advantages)
    with checks_disabled(), pytest.raises(BroadcastError, match=r"\((\d+), 1\) and \(\1,\)"):
        _fit(tmp_path, "--model.total_env_steps=1024")


@pytest.mark.cli
@pytest.mark.no_broadcast_guard
def test_unchecked_column_advantages_learn_far_less(tmp_path: Path, monkeypatch) -> None:
    # Two rollouts are enough: with (N, 1) advantages every action gets the same credit
    # (the loss's gradient for each log-prob is -mean(A)/N), so the buggy run's return stays
    # at its initial policy's while the correct one's climbs.
    budget = ["--model.total_env_steps=2048", "--model.eval_every_env_steps=0"]
    correct = _fit(tmp_path / "correct", *budget)
    monkeypatch.setattr(ppo_module, "clipped_surrogate_loss", _column_advantages)
    # Both defences off, to see what the bug does to learning: annotations and the guard.
    monkeypatch.setattr(ppo_main.PPOCLI, "guarded_steps", 0)
    with checks_disabled():
        buggy = _fit(tmp_path / "buggy", *budget)
    returns = correct["eval_return_mean"], buggy["eval_return_mean"]
    print(
        f"\ncolumn advantages at {budget[0]}: eval return correct {returns[0]}, buggy {returns[1]}"
    )
    assert returns[0] >= 2 * returns[1]


def test_a_plain_trainer_gets_the_statistics_at_the_env_step_count(tmp_path: Path) -> None:
    """A ``Trainer`` of a user's own, with no callback of ours."""
    tiny: dict[str, Any] = dict(num_envs=2, num_steps=16, total_env_steps=64, update_epochs=1)
    module = PPOModule(**tiny, num_minibatches=1, eval_every_env_steps=0, hidden_sizes=(8,))
    logger = CSVLogger(tmp_path)
    own: dict[str, Any] = dict(max_epochs=1, enable_checkpointing=False, enable_progress_bar=False)
    L.Trainer(logger=logger, log_every_n_steps=1, enable_model_summary=False, **own).fit(module)
    rows = list(csv.DictReader((Path(logger.log_dir) / "metrics.csv").read_text().splitlines()))
    assert [int(row["step"]) for row in rows] == [32, 64]  # env steps, not optimizer steps
    assert {*ppo_module.STATISTICS, "learning_rate", "sps"} <= set(rows[0])


# BroadcastGuard raises nothing over a short fit of either policy: no step stretches a pair.
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_fit_has_no_broadcast_false_alarm(env_id: str, tmp_path: Path, broadcast_guard) -> None:
    # Optional terms on (annealing, value clipping, entropy, target KL): every branch runs.
    # The fixture also covers the evaluations (PPOReporting's), the last of which runs
    # after the callback's steps.
    options: dict[str, Any] = dict(update_epochs=2, num_minibatches=2, anneal_lr=True)
    options.update(value_clip_coef=0.2, entropy_coef=0.01, target_kl=1.0)
    options.update(eval_every_env_steps=128, eval_episodes=2)
    module = PPOModule(env_id, num_envs=4, num_steps=32, total_env_steps=3 * 4 * 32, **options)
    callback = BroadcastGuardCallback(steps=3)
    callbacks = [PPOReporting(), callback]
    quiet_trainer(default_root_dir=tmp_path, max_epochs=1, callbacks=callbacks).fit(module)
    assert callback.guarded == 3
