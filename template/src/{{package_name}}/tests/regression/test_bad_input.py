"""Bad input is refused before training, in one line: ``error: <what is wrong>``, exit 2.

Each row of ``ROWS`` is one mistake, (the file, the flags), and the pattern of the line the
output must end with. Rows of table options alone build the DataModule inside ``user_errors``,
as the command line does, without the cost of a LightningCLI; ``THROUGH_CLI`` rows and every
row with other flags run ``main`` and must leave no run directory behind (no training began).
Two rows also run the real command line."""

import re
from pathlib import Path

import pytest
import yaml

from ...regression import RegressionData
from ...regression.__main__ import main
from ...run.errors import user_errors
from ..project import CONFIGS, refusal, refused_line, run_example

CONFIG = CONFIGS / "regression.yaml"
CSV = ["--data.csv_path={dir}/t.csv", "--data.target=y"]
GOOD = "a,y\n1,2\n3,4\n5,6\n"

# row: ((the text of {dir}/t.csv, None for no file; flags, of fit unless first is predict), pattern)
ROWS: dict[str, tuple[tuple[str | None, list[str]], str]] = {
    "missing_file": ((None, CSV), r"^error: --data\.csv_path .*t\.csv: no such file$"),
    "empty_file": (("", CSV), r"t\.csv: the file is empty"),
    "not_utf8": (("a,y\n1,\xff\n3,4\n", CSV), r"t\.csv: not UTF-8 text"),  # the byte 0xff
    "csv_path_without_target": (
        (GOOD, ["--data.csv_path={dir}/t.csv"]),
        r"^error: --data\.csv_path and --data\.target go together: give both or neither$",
    ),
    "no_target_column": (
        ("a,b\n1,2\n3,4\n5,6\n", CSV),
        r"t\.csv: no column 'y' for --data.target; columns are \['a', 'b'\]$",
    ),
    "duplicate_columns": (("a,a,y\n1,2,3\n4,5,6\n", CSV), r"duplicate column names \['a'\]$"),
    "ragged_line": (
        ("a,y\n1,2\n\n3,4,5\n", CSV),
        r"t\.csv: file line 4 has 3 cells, the header has 2$",
    ),
    "cells_past_the_header": (
        ("a,b,y\n1,2,3,4\n5,6,7,8\n9,1,2,3\n", CSV),
        r"t\.csv: a data line has more cells than the header; the cells past it would be lost$",
    ),
    "text_target": (("a,y\n1,2\n3,oops\n5,6\n", CSV), r"data row 2: column 'y' has 'oops', not a"),
    "only_text_features": (
        ("a,y\n1,2\noops,4\n5,6\n", CSV),
        r"no feature column besides the target 'y'; left out: a \(text: 'oops' in data row 2\)$",
    ),
    "missing_cell": (
        ("a,y\n1,2\n3,NA\n5,6\n", CSV),
        r"t\.csv: data row 2: column 'y' is missing \(1 rows have missing cells\); "
        r"--data\.missing drop",
    ),
    "inf_cell": (
        ("a,y\n1,2\n3,4\n-inf,6\n", CSV),
        r"t\.csv: data row 3: column 'a' has -inf: inf is refused, it is not a missing value",
    ),
    "inf_cell_with_drop": (
        ("a,y\n1,2\n3,inf\n5,6\n", [*CSV, "--data.missing=drop"]),
        r"data row 2: column 'y' has inf: inf is refused",
    ),
    "too_few_rows": (("a,y\n1,2\n", CSV), r"t\.csv: needs a header and at least 2 data rows"),
    "too_few_rows_after_drop": (
        ("a,y\n1,2\n,4\n5,null\n", [*CSV, "--data.missing=drop"]),
        r"t\.csv: 1 data rows left after dropping 2 with missing cells",
    ),
    "split_leaves_no_training_rows": (
        (GOOD, [*CSV, "--data.val_fraction=0.9"]),
        r"t\.csv: 3 data rows, and --data.val_fraction=0.9 holds out 3, leaving none",
    ),
    "batch_size_over_processes": (
        (None, ["--trainer.accelerator=cpu", "--trainer.devices=2", "--data.batch_size=255"]),
        r"^error: --data\.batch_size 255 does not split over 2 processes$",
    ),
    "categorical_not_a_column": (
        (GOOD, [*CSV, "--data.categorical=[town]"]),
        r"--data\.categorical names \['town'\], not columns of \['a', 'y'\]$",
    ),
    "categorical_target": ((GOOD, [*CSV, "--data.categorical=[y]"]), r"lists the target 'y'$"),
    "max_levels_below_one": ((GOOD, [*CSV, "--data.max_levels=0"]), r"int >= 1: 0 is out of"),
    "decimal_is_sep": (
        (GOOD, [*CSV, "--data.decimal=,"]),
        r"^error: --data\.decimal ',' is also --data\.sep; they must differ$",
    ),
    "decimal_is_thousands": (
        (GOOD, [*CSV, "--data.sep=;", "--data.thousands=.", "--data.decimal=."]),
        r"^error: --data\.decimal '\.' is also --data\.thousands; they must differ$",
    ),
    "long_separator": ((GOOD, [*CSV, "--data.sep=;;"]), r"--data\.sep ';;': must be one char"),
    "unknown_missing_policy": (
        (GOOD, [*CSV, "--data.missing=skip"]),
        r"^error: Parser key \"data\.missing\": Expected a typing\.Literal\[",
    ),
    "predict_csv_in_fit": (
        (GOOD, [*CSV, "--data.predict_csv={dir}/t.csv"]),
        r"^error: --data\.predict_csv is read by predict only, not by fit$",
    ),
    "predict_without_checkpoint": (
        (GOOD, ["predict", "--data.predict_csv={dir}/t.csv"]),
        r"^error: predict builds the model from --ckpt_path FILE, the checkpoint of a fit run$",
    ),
    "predict_from_a_file_not_a_checkpoint": (
        (GOOD, ["predict", "--ckpt_path={dir}/typo.yaml", "--data.predict_csv={dir}/t.csv"]),
        r"^error: .*typo\.yaml: not a readable checkpoint",
    ),
    "unknown_key": (
        (None, ["--model.hiden_sizes=[8]"]),
        r"^error: unrecognized arguments: --model\.hiden_sizes=\[8\]$",
    ),
    "unknown_key_in_yaml": (
        (None, ["--config={dir}/typo.yaml"]),
        r"^error: Subcommand 'fit' does not accept option 'model\.hiden_sizes'$",
    ),
    "wrong_type": (
        (None, ["--data.batch_size=lots"]),
        r"^error: Parser key \"data\.batch_size\": Not of type int >= 1: invalid literal for",
    ),
}
END_TO_END = ["missing_cell", "wrong_type"]  # a refusal from the data; the parser's usage text
THROUGH_CLI = ["missing_file", "inf_cell", "decimal_is_sep", "categorical_not_a_column"]
THROUGH_CLI += ["unknown_missing_policy", "predict_csv_in_fit", "wrong_type"]  # the parser's
THROUGH_CLI += ["max_levels_below_one"]


def _data_options(row: str, directory: Path = Path(".")) -> dict[str, object] | None:
    """The DataModule's arguments for a row of ``--data.*`` flags to ``fit``, else None."""
    (_, flags), _ = ROWS[row]
    if row in THROUGH_CLI or not all(flag.startswith("--data.") for flag in flags):
        return None
    pairs = (flag.removeprefix("--data.").split("=", 1) for flag in flags)
    return {key: yaml.safe_load(value.format(dir=directory)) for key, value in pairs}


def _args(tmp_path: Path, row: str) -> list[str]:
    (contents, flags), _ = ROWS[row]
    if contents is not None:  # one byte a character, so that \xff is the byte 0xff
        (tmp_path / "t.csv").write_text(contents, encoding="latin-1")
    (tmp_path / "typo.yaml").write_text("model:\n  hiden_sizes: [8]\n")
    subcommand, flags = (flags[0], flags[1:]) if flags[:1] == ["predict"] else ("fit", flags)
    run = [subcommand, "--config", str(CONFIG), f"--trainer.default_root_dir={tmp_path / 'run'}"]
    return run + [flag.format(dir=tmp_path) for flag in flags]


@pytest.mark.parametrize(
    "row", [pytest.param(row, marks=() if _data_options(row) else pytest.mark.cli) for row in ROWS]
)
def test_bad_input_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str
) -> None:
    args, options = _args(tmp_path, row), _data_options(row, tmp_path)  # writes the file
    if options is None:
        line = refusal(capsys, lambda: main(args))
    else:
        line = refusal(capsys, lambda: user_errors()(RegressionData)(**options))  # type: ignore[arg-type]
    assert re.search(ROWS[row][1], line), line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("row", END_TO_END)
def test_command_line_exits_2_with_the_problem_last(tmp_path: Path, row: str) -> None:
    returncode, lines = run_example("regression", _args(tmp_path, row), tmp_path)
    assert returncode == 2
    assert re.search(ROWS[row][1], refused_line(lines)), "\n".join(lines[-30:])
    assert not (tmp_path / "run").exists()
