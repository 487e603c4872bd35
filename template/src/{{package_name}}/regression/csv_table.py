"""Read a CSV into a target vector and a numeric feature matrix, or say exactly what is wrong.

A column is a feature when every one of its cells parses as a finite number; columns with
no numeric cell (ids, names) are left out and reported. Blank lines are skipped; line
numbers in errors are the file's own. A column that is mostly numeric but has a bad cell,
or a NaN or Inf cell anywhere, is an error naming the file, line and column: a NaN would
otherwise poison every loss and statistic without stopping the run. Each error is one line.
"""

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from einops import rearrange

from ..shapes import Float, Tensor


@dataclass(frozen=True)
class NumericTable:
    features: Float[Tensor, "batch feature"]
    target: Float[Tensor, " batch"]
    feature_names: list[str]
    skipped_columns: list[str]


def _parse(cell: str) -> float | None:
    """The cell's number (NaN and Inf included, to be refused by name), or None."""
    if "_" in cell:  # float() would read "1_000" as 1000
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def read_numeric_csv(path: Path, target: str) -> NumericTable:
    if not path.is_file():
        raise FileNotFoundError(f"--data.csv_path {path}: no such file")
    # utf-8-sig: spreadsheets often start the file with a byte-order mark.
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            numbered = [(reader.line_num, row) for row in reader if any(c.strip() for c in row)]
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if not numbered:
        raise ValueError(f"{path}: the file is empty; it needs a header and data rows")
    if len(numbered) < 3:
        raise ValueError(
            f"{path}: needs a header and at least 2 data rows, "
            f"found {max(0, len(numbered) - 1)} data rows"
        )
    header = [name.strip() for name in numbered[0][1]]
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise ValueError(f"{path}: duplicate column names {duplicated}")
    if target not in header:
        raise ValueError(f"{path}: no column {target!r} for --data.target; columns are {header}")
    lines = [line for line, _ in numbered[1:]]
    body = [row for _, row in numbered[1:]]
    for line, row in zip(lines, body, strict=True):
        if len(row) != len(header):
            raise ValueError(f"{path}:{line}: {len(row)} cells, the header has {len(header)}")

    columns: dict[str, list[float]] = {}
    skipped: list[str] = []
    for index, name in enumerate(header):
        parsed = [_parse(row[index]) for row in body]
        bad = [position for position, value in enumerate(parsed) if value is None]
        if len(bad) == len(parsed) and name != target:
            skipped.append(name)
            continue
        if bad:
            cell = body[bad[0]][index]
            raise ValueError(
                f"{path}:{lines[bad[0]]}: column {name!r} has {cell!r}, not a number "
                f"({len(bad)} such cells in the column)"
            )
        numbers = [value for value in parsed if value is not None]
        non_finite = [row for row, value in enumerate(numbers) if not math.isfinite(value)]
        if non_finite:
            cell = body[non_finite[0]][index]
            raise ValueError(
                f"{path}:{lines[non_finite[0]]}: column {name!r} has {cell!r}: NaN and Inf "
                f"cells are refused ({len(non_finite)} in the column)"
            )
        columns[name] = numbers

    feature_names = [name for name in columns if name != target]
    if not feature_names:
        raise ValueError(f"{path}: no numeric column besides the target {target!r}")
    by_column = torch.tensor([columns[name] for name in feature_names], dtype=torch.float32)
    return NumericTable(
        features=rearrange(by_column, "feature batch -> batch feature").contiguous(),
        target=torch.tensor(columns[target], dtype=torch.float32),
        feature_names=feature_names,
        skipped_columns=skipped,
    )
