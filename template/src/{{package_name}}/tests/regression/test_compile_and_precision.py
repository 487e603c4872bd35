"""The regression network compiled, checks on: a wrong shape still raises at the compiled
boundary. (A compiled fit: ``test_run_files.py``; bf16 autocast: ``test_regression.py``.)"""

import pytest
import torch
from jaxtyping import TypeCheckError

from ...regression import RegressionModule


def test_compiled_module_rejects_a_column_input() -> None:
    torch._dynamo.reset()
    module = RegressionModule(3, (8,), compile=True, compile_backend="aot_eager")
    assert module(torch.randn(4, 3)).shape == (4,)
    assert module(torch.randn(4, 3)).shape == (4,)
    with pytest.raises(TypeCheckError):
        module(torch.randn(4, 3, 1))
