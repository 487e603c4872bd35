"""The regression example's training, validation and optimizer steps stretch no operand
pair: BroadcastGuard raises nothing over a short fit."""

import lightning as L

from ...core.broadcast import BroadcastGuard
from ...regression import RegressionData, RegressionModule
from ...run.guards import BroadcastGuardCallback


def test_regression_fit_has_no_broadcast_false_alarm(broadcast_guard: BroadcastGuard) -> None:
    # The fixture guards the whole fit (setup, validation, checkpoints); the callback's own
    # guard proves the training-time path is active for every one of its steps.
    data = RegressionData()
    module = RegressionModule(
        data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    callback = BroadcastGuardCallback(steps=6)
    trainer = L.Trainer(
        max_epochs=2,
        limit_train_batches=3,
        limit_val_batches=2,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, data)
    assert callback.guarded == 6
