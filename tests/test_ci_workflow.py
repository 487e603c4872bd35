"""The generated CI tests the chosen minimum Python and the newest the template offers.

Each version appears once, and none is below the minimum, where the project could not be
installed (``requires-python`` is the minimum).
"""

from pathlib import Path

import pytest
import yaml
from conftest import preset_answers, render


@pytest.mark.parametrize(
    ("minimum", "matrix"),
    [
        ("3.10", ["3.10", "3.13"]),
        ("3.13", ["3.13"]),
    ],
)
def test_ci_matrix_is_the_minimum_and_the_newest_python(
    minimum: str, matrix: list[str], tmp_path: Path
) -> None:
    answers = preset_answers("minimal") | {"python_version": minimum}
    project = render(tmp_path / "project", answers)

    workflow = yaml.safe_load((project / ".github" / "workflows" / "ci.yml").read_text())

    assert workflow["jobs"]["check"]["strategy"]["matrix"]["python-version"] == matrix
    assert f'requires-python = ">={minimum}"' in (project / "pyproject.toml").read_text()
