"""A sweep of the sequence example on its shipped space: each trial reports its
validation accuracy every epoch, and the best one's arguments land in ``best.yaml``."""

import json
from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState

from ...sweep.__main__ import main as sweep_main
from ..project import CONFIGS


@pytest.mark.cli
def test_sweep_of_the_shipped_space_maximises_val_accuracy(tmp_path: Path) -> None:
    tiny = ["--trainer.max_epochs=2", "--model.heads=2", "--trainer.enable_model_summary=false"]
    args = ["sequence", f"--space={CONFIGS / 'sweep' / 'sequence.yaml'}", "--trials=2"]
    args += [f"--config={CONFIGS / 'sequence.yaml'}", f"--root={tmp_path}", "--study=vowels"]
    study = sweep_main([*args, "--", *tiny])

    folder = tmp_path / "vowels"
    assert [trial.state for trial in study.trials] == [TrialState.COMPLETE] * 2
    for past in study.trials:
        (path,) = (folder / f"trial_{past.number}").rglob("summary.json")
        assert json.loads(path.read_text())["val_accuracy"] == past.value
        assert sorted(past.intermediate_values) == [0, 1]  # every epoch's validation
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["model"]["learning_rate"] == study.best_params["model.learning_rate"]
