"""What a real export holds is read, not refused: separators, thousands and decimal marks,
missing cells to drop, text columns to one-hot or leave out, with one line that says so."""

from pathlib import Path

import pytest
import torch

from ...regression import RegressionData
from ...run.errors import UserError


def _read(tmp_path: Path, text: str, **options: object) -> RegressionData:
    (tmp_path / "t.csv").write_text(text)
    return RegressionData(csv_path=tmp_path / "t.csv", **options)  # type: ignore[arg-type]


def _every_row(data: RegressionData, tensor: int = 0) -> torch.Tensor:
    """The features (``tensor`` 1: the targets) of every row read, both splits together."""
    return torch.cat([data.train_set[:][tensor], data.val_set[:][tensor]])


def test_thousands_and_decimal_marks_are_read(tmp_path: Path) -> None:
    text = 'area;price\n"1.234,5";10\n2,25;20\n3;30\n4;40\n'
    data = _read(tmp_path, text, target="price", sep=";", thousands=".", decimal=",")
    assert sorted(_every_row(data)[:, 0].tolist()) == pytest.approx([2.25, 3.0, 4.0, 1234.5])


def test_drop_counts_rows_and_the_line_names_what_was_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``flag``'s True and False are text, not the booleans pandas reads, so it is left out."""
    text = "id,a,flag,city,y\nr1,1,True,Paris,2\nr2,NA,False,Lyon,3\nr3,3,True,Nice,\n"
    text += "r4,4,False,Paris,5\nr5,5,True,Nice,6\n"
    with caplog.at_level("INFO"):
        data = _read(tmp_path, text, target="y", missing="drop", categorical=["city"])
    (line,) = [record.message for record in caplog.records if "t.csv: read" in record.message]
    assert "read 5 rows, dropped 2 with missing cells" in line
    assert line.endswith(
        "left out: id (text: 'r1' in data row 1), flag (text: 'True' in data row 1)"
    )
    assert len(data.train_set) + len(data.val_set) == 3
    assert data.feature_columns == ["a", "city"]
    assert data.num_features == 1 + len(data.categories["city"])


def test_levels_past_max_levels_encode_as_zeros(tmp_path: Path) -> None:
    cities = ["A"] * 6 + ["B"] * 4 + ["C", "D"]
    text = "city,y\n" + "".join(f"{c},{i}\n" for i, c in enumerate(cities))
    data = _read(tmp_path, text, target="y", categorical=["city"], max_levels=2)
    assert data.categories == {"city": ["A", "B"]}
    rows = _every_row(data)
    assert rows.shape[1] == 2 and (rows.sum(dim=1) <= 1).all()


def test_lines_ending_in_the_separator_keep_their_columns(tmp_path: Path) -> None:
    data = _read(tmp_path, "a,b,y\n1,2,3,\n5,6,7,\n9,1,2,\n4,4,4,\n", target="y")
    assert data.feature_columns == ["a", "b"]
    assert sorted(_every_row(data, 1).tolist()) == [2.0, 3.0, 4.0, 7.0]


@pytest.mark.parametrize("cell", ["156,486", "1,234.5"])
def test_a_number_with_thousands_commas_is_refused_with_the_option_that_reads_it(
    tmp_path: Path, cell: str
) -> None:
    text = "area,price\n" + "".join(f'{i},"{cell}"\n' for i in range(4))
    with pytest.raises(UserError) as refused:
        _read(tmp_path, text, target="price")
    named = f"column 'price' has '{cell}', not a number; --data.thousands , reads 1,234.5"
    assert str(refused.value).endswith(named)
    # The option works; quoted, a number may hold the separator as its thousands mark.
    data = _read(tmp_path, text, target="price", thousands=",")
    assert _every_row(data, 1).tolist() == [float(cell.replace(",", ""))] * 4
