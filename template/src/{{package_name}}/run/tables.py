"""Reading a user's table with pandas, shared by the examples' readers: what pandas refuses
becomes one line naming the file, and a column of text is named by its first text cell, so
that a typo in a numeric column shows.
"""

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from .errors import UserError

Missing = Literal["error", "drop"]  # what a missing cell does: refuse the table, or drop the row


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn what pandas refuses while it reads ``path`` into a one-line UserError. With
    ``index_col=False`` it drops the cells past the header's with only a warning: refused."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "error", "Length of header or names does not match", pd.errors.ParserWarning
            )
            yield
        return
    except pd.errors.ParserWarning:
        message = "a data line has more cells than the header; the cells past it would be lost"
    except pd.errors.EmptyDataError:  # a ValueError: caught first
        message = "the file is empty; it needs a header and data rows"
    except UnicodeDecodeError as error:  # a ValueError too
        message = f"not UTF-8 text ({error.reason} at byte {error.start})"
    except OSError as error:
        message = f"cannot read it ({error.strerror or error})"
    except (pd.errors.ParserError, ValueError) as error:
        message = " ".join(str(error).split())
        if fields := re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message):
            message = "file line {1} has {2} cells, the header has {0}".format(*fields.groups())
        else:
            message = f"the reader refused the file: {message}"
    raise UserError(f"{path}: {message}")


def numeric(column: pd.Series) -> bool:
    """Whether pandas read ``column`` as numbers, not booleans (True/False cells are text)."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def first_text_cell(column: pd.Series) -> tuple[int, str]:
    """The index and text of ``column``'s first cell that is not a number (of its first
    cell in a column of booleans, which pass ``to_numeric``)."""
    parsed = pd.Series(pd.to_numeric(column, errors="coerce"))
    text = np.flatnonzero(column.notna().to_numpy() & parsed.isna().to_numpy())
    position = int(text[0]) if len(text) else 0
    return int(column.index[position]), str(column.iloc[position])


def text_column(column: pd.Series) -> str:
    """A left-out column, named with its first text cell (its index is the data row)."""
    row, cell = first_text_cell(column)
    return f"{column.name} (text: {cell!r} in data row {row})"
