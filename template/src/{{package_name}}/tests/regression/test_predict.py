"""``predict`` from a checkpoint: the model comes from the file alone, predictions.csv holds
every input row and column plus the prediction in the target's units, and a file of a
million rows is read in chunks."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from ...regression import RegressionModule
from ...regression.__main__ import main
from ..project import CONFIGS, PACKAGE, child_environment, refusal

CONFIG = CONFIGS / "regression.yaml"
TINY = ["--model.hidden_sizes=[8]", "--trainer.max_epochs=2", "--trainer.enable_progress_bar=false"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model fitted on a CSV of 3 columns, one of them one-hot (so not 8 features, the
    synthetic set's width that a link from the data would give it)."""
    root = tmp_path_factory.mktemp("fit")
    a, b = torch.randn(2, 200, generator=torch.Generator().manual_seed(0)).tolist()
    cities = ["Paris", "Lyon", "Nice"]
    rows = [f"r{i},{a[i]},{cities[i % 3]},{b[i]},{3 * a[i] - b[i] + i % 3}\n" for i in range(200)]
    (root / "train.csv").write_text("id,a,city,b,price\n" + "".join(rows))
    options = [f"--data.csv_path={root / 'train.csv'}", "--data.target=price"]
    options.append("--data.categorical=[city]")
    main(["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={root}", *TINY, *options])
    return root / "checkpoints" / "last.ckpt"


def _predict_args(checkpoint: Path, csv: Path, root: Path, *extra: str) -> list[str]:
    """The predict command line; ``--data.predict_csv`` last, so ``[:-1]`` drops it."""
    return ["predict", "--config", str(CONFIG), f"--trainer.default_root_dir={root}",
            "--trainer.enable_progress_bar=false", *extra, f"--ckpt_path={checkpoint}",
            f"--data.predict_csv={csv}"]  # fmt: skip


@pytest.mark.cli
def test_predictions_equal_the_forward_of_the_checkpoint_in_target_units(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "new.csv"
    # Columns in another order, an extra one, a missing cell, an unseen level.
    csv.write_text("b,note,city,a\n0.5,x,Paris,1.5\n-1,y,Lyon,\n0.25,z,Rome,-2\n2,w,Nice,0\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        main(_predict_args(checkpoint, csv, tmp_path / "run"))
        (written,) = (tmp_path / "run").rglob("predictions.csv")
        # ModelCheckpoint says it will not reload its best files from another folder; only
        # a fit writes checkpoints, so predict under a root of its own hides that, and only
        # for the predict: a fit that this process runs next is told.
        hidden = [f for f in warnings.filters if f[1] and f[1].match("The dirpath has changed")]
    assert [str(w.message) for w in caught if "dirpath has changed" in str(w.message)] == []
    assert hidden == []
    out = capsys.readouterr()
    assert str(written) in out.out
    assert "1 of 4 rows have a missing feature cell" in out.err
    assert "1 of 4 rows have a category level the training split did not have" in out.err
    assert written.parent.parent.name == "lightning_logs"

    table = pd.read_csv(written, keep_default_na=False, dtype=str)
    assert list(table.columns) == ["b", "note", "city", "a", "prediction"]
    assert list(table["note"]) == ["x", "y", "z", "w"]
    assert table.at[1, "prediction"] == ""

    (summary,) = checkpoint.parents[1].rglob("summary.json")
    assert json.loads(summary.read_text())["val_r2"] is not None
    # The encoding is in the checkpoint, in built-in types: it loads weights only.
    hyperparameters = torch.load(checkpoint, weights_only=True)["hyper_parameters"]
    assert list(hyperparameters["feature_columns"]) == ["a", "city", "b"]
    assert hyperparameters["num_features"] == 5 and len(hyperparameters["feature_mean"]) == 5
    model = RegressionModule.load_from_checkpoint(checkpoint, weights_only=True).eval()
    levels = model.hparams["categories"]["city"]
    assert sorted(levels) == ["Lyon", "Nice", "Paris"]
    rows = [(1.5, "Paris", 0.5), (-2.0, "Rome", 0.25), (0.0, "Nice", 2.0)]
    features = torch.tensor(
        [[a, *[float(city == level) for level in levels], b] for a, city, b in rows]
    )
    with torch.no_grad():
        expected = model(features).double()
    predicted = torch.tensor([float(table.at[i, "prediction"]) for i in (0, 2, 3)]).double()
    torch.testing.assert_close(predicted, expected, atol=1e-6, rtol=0)


@pytest.mark.cli
def test_predict_refuses_a_file_without_a_feature_column_and_reads_one_of_only_a_header(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "new.csv"
    csv.write_text("a,b\n1,2\n")
    args = _predict_args(checkpoint, csv, tmp_path)
    line = refusal(capsys, lambda: main(args))
    assert line == f"error: {csv}: no column 'city'; the model reads ['a', 'city', 'b']"
    csv.write_text("a,b,city\n1,2,Paris\noops,1,Lyon\n")
    line = refusal(capsys, lambda: main(args))
    assert line == f"error: {csv}: data row 2: column 'a' has 'oops', not a number"
    line = refusal(capsys, lambda: main(args[:-1]))
    assert line == "error: predict reads --data.predict_csv FILE: name the CSV to predict"
    absent = tmp_path / "no.csv"
    line = refusal(capsys, lambda: main([*args[:-1], f"--data.predict_csv={absent}"]))
    assert line == f"error: --data.predict_csv {absent}: no such file"
    csv.write_text("a,b,city\n")  # no rows: no refusal, and a file of no predictions
    main(args)
    (written,) = tmp_path.rglob("predictions.csv")
    assert written.read_text().splitlines() == ["a,b,city,prediction"]


CHILD = """
import os, resource, sys
from PACKAGE.regression.__main__ import main
# The resident memory now (the peak so far may be higher: imports), in KiB like ru_maxrss.
before = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
main(sys.argv[1:])
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)  # growth, MiB
"""


@pytest.mark.slow
def test_a_million_rows_are_predicted_in_chunks(checkpoint: Path, tmp_path: Path) -> None:
    block = "".join(f"{i / 100},{(i * 7) % 13 / 5},{'Paris' if i % 2 else 'Nice'}\n"
                    for i in range(1000))  # fmt: skip
    csv = tmp_path / "million.csv"
    csv.write_text("a,b,city\n" + block * 1000)
    args = _predict_args(checkpoint, csv, tmp_path, "--trainer.logger=false")
    command = [sys.executable, "-c", CHILD.replace("PACKAGE", PACKAGE), *args]
    environment = child_environment()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout.strip().splitlines()[-1]) < 1024  # MiB of peak memory growth
    with (tmp_path / "predictions.csv").open() as handle:
        assert sum(1 for _ in handle) == 1_000_001
