"""The regression example with ``torch.compile`` and bf16 autocast, checks on: it fits,
and a wrong shape still raises at the compiled network's boundary."""

import json
from pathlib import Path

import pytest
import torch
from jaxtyping import TypeCheckError

from ...regression import RegressionModule
from ...regression.__main__ import main

CONFIG = Path(__file__).resolve().parents[4] / "configs" / "regression.yaml"
QUICK = [
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=3",
    "--trainer.limit_val_batches=2",
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
    assert summary["epochs"] == 2


def test_compiled_module_rejects_a_column_input() -> None:
    torch._dynamo.reset()
    module = RegressionModule(
        num_features=3, hidden_sizes=(8,), compile=True, compile_backend="aot_eager"
    )
    assert module(torch.randn(4, 3)).shape == (4,)
    assert module(torch.randn(4, 3)).shape == (4,)
    with pytest.raises(TypeCheckError):
        module(torch.randn(4, 3, 1))


def test_bf16_mixed_fit_with_checks_on(tmp_path: Path) -> None:
    summary = _fit(tmp_path, "--trainer.precision=bf16-mixed")
    assert summary["epochs"] == 2
