"""Where the project's files are, named once, so no test counts ``parents[N]``.

``PACKAGE`` is the import name, read from this module's own dotted name, so the tests
work under any package name the project was generated with.
"""

from pathlib import Path

PACKAGE = __name__.split(".")[0]
PACKAGE_DIR = Path(__file__).resolve().parents[2]
SOURCE_ROOT = PACKAGE_DIR.parent  # the folder that holds the package: put it on PYTHONPATH
PROJECT_ROOT = SOURCE_ROOT.parent
CONFIGS = PROJECT_ROOT / "configs"
DOCS = PROJECT_ROOT / "docs"
