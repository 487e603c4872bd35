"""Read a CSV export with pandas into the numbers the model takes, or say in one line why not.

Missing cells are the reader's own markers; ``inf`` is refused, it would poison every
statistic. The reader's parse errors name file lines; a bad cell is named by its data row
(the n-th row under the header, blank lines not counted). What is read and refused:
``docs/regression.md``.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..run.errors import UserError
from ..run.tables import Missing, first_text_cell, numeric, reading, text_column


@dataclass(frozen=True)
class TableOptions:
    """How the file is written, checked when it is made."""

    sep: str = ","
    thousands: str | None = None
    decimal: str = "."

    def __post_init__(self) -> None:
        marks = {"--data.sep": self.sep, "--data.decimal": self.decimal}
        for option, mark in {**marks, "--data.thousands": self.thousands}.items():
            if mark is not None and (len(mark) != 1 or mark in '\r\n"'):
                raise UserError(f"{option} {mark!r}: must be one character, not a quote or newline")
        for option, mark in (("--data.sep", self.sep), ("--data.thousands", self.thousands)):
            if self.decimal == mark:
                raise UserError(f"--data.decimal {mark!r} is also {option}; they must differ")


@dataclass(frozen=True)
class Encoding:
    """How table columns become model inputs, in built-in types so that a checkpoint holds
    it: one number per numeric column, one indicator per level of a column in ``categories``."""

    columns: list[str]
    categories: dict[str, list[str]]

    def encode(self, frame: pd.DataFrame, path: Path) -> tuple[np.ndarray, np.ndarray, int]:
        """``(features, complete, unseen)``: float32 inputs of shape ``(rows, width)`` with
        missing cells as 0, whether each row has every cell, and how many rows hold a
        category level that the training split did not (encoded as all zeros)."""
        width = sum(len(self.categories.get(name, [None])) for name in self.columns)
        features = np.zeros((len(frame), width), dtype=np.float32)
        unseen = np.zeros(len(frame), dtype=bool)
        start = 0
        for name in self.columns:
            if name in self.categories:
                levels = self.categories[name]
                codes = pd.Categorical(frame[name].astype("string"), categories=levels).codes
                rows = np.flatnonzero(codes >= 0)
                features[rows, start + codes[rows]] = 1.0
                unseen |= frame[name].notna().to_numpy() & (codes < 0)
                start += len(levels)
            else:
                features[:, start] = np.nan_to_num(numbers(frame[name], name, path), nan=0.0)
                start += 1
        complete = np.array(frame[self.columns].notna().all(axis=1), dtype=bool)  # a writable copy
        return features, complete, int(unseen.sum())


def numbers(column: pd.Series, name: str, path: Path) -> np.ndarray:
    """The column as float64 (missing cells NaN), or a UserError naming its first text or
    ``inf`` cell by data row."""
    if not column.empty and not numeric(column):
        row, cell = first_text_cell(column)
        thousands = re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", cell)
        fix = "; --data.thousands , reads 1,234.5" if thousands else ""
        raise UserError(f"{path}: data row {row}: column {name!r} has {cell!r}, not a number{fix}")
    values = column.to_numpy(dtype=np.float64, na_value=np.nan)
    if len(infinite := np.flatnonzero(np.isinf(values))):
        raise UserError(
            f"{path}: data row {int(column.index[infinite[0]])}: column {name!r} has "
            f"{values[infinite[0]]}: inf is refused, it is not a missing value "
            f"({len(infinite)} such cells)"
        )
    return values


def read_header(path: Path, options: TableOptions, option: str) -> list[str]:
    """The column names as written (pandas would rename a repeated one ``a.1``: refused)."""
    if not path.is_file():
        raise UserError(f"{option} {path}: no such file")
    with reading(path):
        first = pd.read_csv(
            path, sep=options.sep, header=None, nrows=1, dtype="string", encoding="utf-8-sig"
        )
    header = [str(name).strip() for name in first.iloc[0].tolist()]
    if duplicated := sorted({name for name in header if header.count(name) > 1}):
        raise UserError(f"{path}: duplicate column names {duplicated}")
    return header


def read_csv(
    path: Path, options: TableOptions, text: list[str], chunksize: int | None = None
) -> pd.DataFrame | Iterator[pd.DataFrame]:
    """The table, or an iterator of ``chunksize`` rows at a time, with ``text`` columns read
    as text (category levels stay as written: ``"007"``, not 7)."""
    with reading(path):
        return pd.read_csv(
            path,
            sep=options.sep,
            thousands=options.thousands,
            decimal=options.decimal,
            dtype=dict.fromkeys(text, "string"),
            encoding="utf-8-sig",  # spreadsheets often start a file with a byte-order mark
            chunksize=chunksize,
            # Never take the first column for an index: a line ending in the separator
            # would otherwise shift every column one place.
            index_col=False,
        )


def read_table(
    path: Path, target: str, options: TableOptions, categorical: list[str], missing: Missing
) -> tuple[pd.DataFrame, list[str], str]:
    """The rows a model can learn from (the target, then the feature columns in file order,
    indexed by data row), the feature columns and a line that says what was read."""
    header = read_header(path, options, "--data.csv_path")
    if target not in header:
        raise UserError(f"{path}: no column {target!r} for --data.target; columns are {header}")
    if absent := [name for name in categorical if name not in header]:
        raise UserError(f"{path}: --data.categorical names {absent}, not columns of {header}")
    if target in categorical:
        raise UserError(f"{path}: --data.categorical lists the target {target!r}")
    frame = read_csv(path, options, categorical)
    assert isinstance(frame, pd.DataFrame)
    frame.columns, frame.index = header, pd.RangeIndex(1, len(frame) + 1)  # data rows
    if len(frame) < 2:
        raise UserError(f"{path}: needs a header and at least 2 data rows, found {len(frame)}")

    numbers(frame[target], target, path)
    left_out: list[str] = []
    columns: list[str] = []
    for name in (name for name in header if name != target):
        column = frame[name]
        if name in categorical:
            columns.append(name)
        elif column.isna().all():
            left_out.append(f"{name} (empty)")
        elif numeric(column):
            numbers(column, name, path)  # refuses inf
            columns.append(name)
        else:
            left_out.append(text_column(column))
    if not columns:
        raise UserError(
            f"{path}: no feature column besides the target {target!r}; left out: "
            + ", ".join(left_out)
        )

    used = frame[[target, *columns]]
    gaps = used.isna().to_numpy()
    incomplete = gaps.any(axis=1)
    dropped = int(incomplete.sum())
    if dropped and missing == "error":
        row = int(incomplete.argmax())
        raise UserError(
            f"{path}: data row {used.index[row]}: column {used.columns[gaps[row].argmax()]!r} is "
            f"missing ({dropped} rows have missing cells); --data.missing drop leaves such rows out"
        )
    if len(kept := used.loc[~incomplete]) < 2:
        raise UserError(
            f"{path}: {len(kept)} data rows left after dropping {dropped} with missing cells; "
            "at least 2 are needed"
        )
    summary = (
        f"{path}: read {len(frame)} rows, dropped {dropped} with missing cells; "
        f"target {target!r}; features {columns}"
        + (f" ({', '.join(categorical)} one-hot)" if categorical else "")
        + f"; left out: {', '.join(left_out) or 'none'}"
    )
    return kept, columns, summary


def fit_encoding(
    frame: pd.DataFrame, columns: list[str], categorical: list[str], max_levels: int
) -> tuple[Encoding, list[str]]:
    """The encoding learnt from the training rows, and a note for each categorical column
    past ``max_levels`` levels (the rarer encode as all zeros, like a level new to predict)."""
    categories: dict[str, list[str]] = {}
    capped: list[str] = []
    for name in (name for name in columns if name in categorical):
        # The most frequent first, ties by name, so the order does not depend on the rows'.
        counts = frame[name].value_counts()
        ranked = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
        categories[name] = [str(level) for level, _ in ranked[:max_levels]]
        if len(ranked) > max_levels:
            rare = int(sum(count for _, count in ranked[max_levels:]))
            capped.append(
                f"{name}: {len(ranked)} levels, the {max_levels} most frequent kept, "
                f"{rare} rows of rarer ones encode as all zeros"
            )
    return Encoding(columns=list(columns), categories=categories), capped
