"""A rendered project's wheel ships its package and leaves out the tests.

The tests live inside the package, where relative imports keep every template file plain
Python, so only the build configuration keeps them out of an installed project. The wheel
is built in this process with hatchling's own build hook, as pip would call it, offline.
"""

import zipfile
from pathlib import Path

import pytest
from hatchling.build import build_wheel


def _package_files(project: Path) -> tuple[str, set[str]]:
    """The package's name and its files outside ``tests/``, as paths inside a wheel."""
    (package,) = (project / "src").iterdir()
    files = {
        path.relative_to(package.parent).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    return package.name, {name for name in files if not name.startswith(f"{package.name}/tests/")}


def test_wheel_ships_the_package_without_its_tests(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, expected = _package_files(project)
    assert (project / "src" / package / "tests" / "conftest.py").is_file()
    monkeypatch.chdir(project)
    wheel = tmp_path / build_wheel(str(tmp_path))
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if ".dist-info/" not in name}
    assert shipped == expected
