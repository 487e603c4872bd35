"""The PPO example's rollouts, updates and evaluation stretch no operand pair, for the
categorical and the Gaussian policy alike: BroadcastGuard raises nothing over a short fit."""

from pathlib import Path

import lightning as L
import pytest

from ...core.broadcast import BroadcastGuard
from ...ppo import PPOModule, PPOReporting
from ...run.guards import BroadcastGuardCallback


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_fit_has_no_broadcast_false_alarm(
    env_id: str, tmp_path: Path, broadcast_guard: BroadcastGuard
) -> None:
    # Optional terms on (annealing, value clipping, entropy, target KL): every branch runs.
    # The fixture also covers the evaluations (PPOReporting's), the last of which runs
    # after the callback's steps.
    module = PPOModule(
        env_id,
        num_envs=4,
        num_steps=32,
        total_env_steps=3 * 4 * 32,
        update_epochs=2,
        num_minibatches=2,
        anneal_lr=True,
        value_clip_coef=0.2,
        entropy_coef=0.01,
        target_kl=1.0,
        eval_every_env_steps=128,
        eval_episodes=2,
    )
    callback = BroadcastGuardCallback(steps=3)
    trainer = L.Trainer(
        max_epochs=1,
        default_root_dir=tmp_path,
        callbacks=[PPOReporting(), callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module)
    assert callback.guarded == 3
