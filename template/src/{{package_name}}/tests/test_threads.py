"""Every example computes with the CPU threads of one setting (``run/threads.py``): the
option, else ``OMP_NUM_THREADS``, else one. An in-process fit gives the count back."""

import json
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from ..run.errors import UserError
from ..run.threads import chosen
from .project import EXAMPLES, QUIET, example_main


def test_the_option_comes_before_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert chosen(None) == 2
    assert chosen(1) == 1


def test_without_option_or_environment_a_run_takes_one_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert chosen(None) == 1


@pytest.mark.parametrize("exported", ["0", "-2", "two"])
def test_an_exported_count_below_one_is_refused(
    monkeypatch: pytest.MonkeyPatch, exported: str
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", exported)
    with pytest.raises(UserError, match=f"OMP_NUM_THREADS={exported}: "):
        chosen(None)


def test_more_threads_than_usable_cores_is_a_one_line_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert chosen(100_000) == 100_000  # more cores than any machine this runs on
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: ")


TINY = {
    "regression": ["--data.synthetic_samples=128", "--model.hidden_sizes=[4]"],
    "sequence": ["--model.width=4", "--model.heads=1", "--model.layers=1"],
    "ppo": ["--model.num_envs=2", "--model.num_steps=8", "--model.total_env_steps=16"]
    + ["--model.num_minibatches=1", "--model.update_epochs=1", "--model.eval_episodes=1"],
}


def _fit(example: str, root: Path, *callbacks: Callback) -> None:
    run = ["--trainer.max_epochs=1", "--trainer.logger=false", "--model.torch_threads=2"]
    args = ["fit", f"--trainer.default_root_dir={root}", *QUIET, *run, *TINY[example]]
    example_main(example)(args, callbacks)


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
def test_a_fit_records_its_threads_and_gives_the_process_its_own_back(
    tmp_path: Path, example: str
) -> None:
    _fit(example, tmp_path)
    assert torch.get_num_threads() == 1  # the conftest's
    (summary,) = tmp_path.rglob("summary.json")
    assert json.loads(summary.read_text())["torch_threads"] == 2


class _Fails(Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        assert torch.get_num_threads() == 2
        raise RuntimeError("a bug in the run")


@pytest.mark.cli
def test_a_failed_fit_gives_the_process_its_threads_back(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="a bug in the run"):
        _fit(EXAMPLES[0], tmp_path, _Fails())
    assert torch.get_num_threads() == 1
