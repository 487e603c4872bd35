"""Bad input is refused before training, and the output ends with one line naming it.

Each row of ``ROWS`` is one mistake and the line it must end with. In-process, every row
must raise or exit with that line and leave no run directory behind (no training began);
two rows also run the real command line, whose exit status must be non-zero and whose
last line of output must be that line.
"""

import re
from pathlib import Path

import pytest

from ...regression.__main__ import main
from ..helpers.command_line import run_example
from ..helpers.paths import CONFIGS

CONFIG = CONFIGS / "regression.yaml"
CSV = ["--data.csv_path={dir}/t.csv", "--data.target=y"]

# row: (contents of {dir}/t.csv or None for no file, extra flags, the last line's pattern)
ROWS: dict[str, tuple[str | None, list[str], str]] = {
    "missing_file": (None, CSV, r"FileNotFoundError: --data.csv_path .*t\.csv: no such file"),
    "empty_file": ("", CSV, r"ValueError: .*t\.csv: the file is empty"),
    "no_target_column": (
        "a,b\n1,2\n3,4\n5,6\n",
        CSV,
        r"t\.csv: no column 'y' for --data.target; columns are \['a', 'b'\]$",
    ),
    "non_numeric_cell": ("a,y\n1,2\noops,4\n5,6\n", CSV, r"t\.csv:3: column 'a' has 'oops'"),
    "nan_cell": ("a,y\n1,2\n3,nan\n5,6\n", CSV, r"t\.csv:3: column 'y' has 'nan': NaN and Inf"),
    "inf_cell": ("a,y\n1,2\n3,4\n-inf,6\n", CSV, r"t\.csv:4: column 'a' has '-inf': NaN and Inf"),
    "too_few_rows": ("a,y\n1,2\n", CSV, r"t\.csv: needs a header and at least 2 data rows"),
    "split_leaves_no_training_rows": (
        "a,y\n1,2\n3,4\n5,6\n",
        [*CSV, "--data.val_fraction=0.9"],
        r"t\.csv: 3 data rows, and --data.val_fraction=0.9 holds out 3, leaving none",
    ),
    "unknown_key": (
        None,
        ["--model.hiden_sizes=[8]"],
        r"^error: unrecognized arguments: --model\.hiden_sizes=\[8\]$",
    ),
    "unknown_key_in_yaml": (
        None,
        ["--config={dir}/typo.yaml"],
        r"^error: Subcommand 'fit' does not accept option 'model\.hiden_sizes'$",
    ),
    "wrong_type": (
        None,
        ["--data.batch_size=lots"],
        r"^error: Parser key \"data\.batch_size\": Expected a <class 'int'>\. Got value: lots$",
    ),
}
END_TO_END = ["nan_cell", "wrong_type"]  # an exception's traceback; the parser's usage text


def _args(tmp_path: Path, row: str) -> list[str]:
    contents, flags, _ = ROWS[row]
    if contents is not None:
        (tmp_path / "t.csv").write_text(contents)
    (tmp_path / "typo.yaml").write_text("model:\n  hiden_sizes: [8]\n")
    run = ["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={tmp_path / 'run'}"]
    return run + [flag.format(dir=tmp_path) for flag in flags]


def _last_line_in_process(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The line a refused run ends with: the parser's ``error:`` line, or the exception's."""
    try:
        main(args)
    except SystemExit as exited:
        assert exited.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]
    except (ValueError, FileNotFoundError) as error:
        assert "\n" not in str(error)
        return f"{type(error).__name__}: {error}"
    raise AssertionError("the run was not refused")


@pytest.mark.cli
@pytest.mark.parametrize("row", ROWS)
def test_bad_input_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str
) -> None:
    line = _last_line_in_process(_args(tmp_path, row), capsys)
    assert re.search(ROWS[row][2], line), line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("row", END_TO_END)
def test_command_line_exits_nonzero_with_the_problem_last(tmp_path: Path, row: str) -> None:
    returncode, lines = run_example("regression", _args(tmp_path, row), tmp_path)
    assert returncode != 0
    assert re.search(ROWS[row][2], lines[-1]), "\n".join(lines[-30:])
    assert not (tmp_path / "run").exists()
