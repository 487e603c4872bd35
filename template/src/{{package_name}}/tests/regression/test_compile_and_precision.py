"""The regression example with ``torch.compile`` and bf16 autocast, checks on: it fits,
and a wrong shape still raises at the compiled network's boundary. The compiled fit runs in
a child process: compiling costs seconds, and dynamo's caches stay out of pytest's."""

from pathlib import Path

import pytest
import torch
from jaxtyping import TypeCheckError

from ...regression import RegressionModule
from ..project import QUIET, fit_summary
from .test_regression import CONFIG, QUICK, _fit


@pytest.mark.slow
def test_compiled_fit_with_checks_on(tmp_path: Path) -> None:
    compiled = ["--model.compile=true", "--model.compile_backend=aot_eager"]
    summary = fit_summary("regression", CONFIG, [*QUICK, *QUIET, *compiled], tmp_path)
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


@pytest.mark.cli
def test_bf16_mixed_fit_with_checks_on(tmp_path: Path) -> None:
    summary = _fit(tmp_path, *QUICK, "--trainer.precision=bf16-mixed")
    assert summary["epochs"] == 2
