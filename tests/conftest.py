"""Render each preset once per session; tests share the rendered projects."""

from pathlib import Path

import copier
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(path.stem for path in (ROOT / "configs").glob("*.yml"))


def render(destination: Path, data: dict[str, object]) -> Path:
    """Render the template at HEAD (plus uncommitted changes) with ``data``, no prompts."""
    copier.run_copy(
        str(ROOT), destination, data=data, defaults=True, vcs_ref="HEAD", quiet=True, unsafe=False
    )
    return destination


@pytest.fixture(scope="session", params=PRESETS)
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    preset = yaml.safe_load((ROOT / "configs" / f"{request.param}.yml").read_text()) or {}
    return render(tmp_path_factory.mktemp(request.param) / "project", preset)
