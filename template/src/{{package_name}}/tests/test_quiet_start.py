"""The command lines print nothing from third parties that a user cannot act on, and
hide nothing else: while ``cli.quiet_third_parties`` is open, it filters two notices by
category and message, and Lightning's cloud tips by message on the logger that emits them.
Importing the package's modules installs no filter, and the context leaves none behind.
(The command lines' own output is checked in ``helpers.command_line.fit_summary``.)"""

import logging
import subprocess
import sys
import warnings

import lightning as L
import pytest

from ..run.cli import _TIP_SOURCES, quiet_third_parties
from .helpers.command_line import child_environment
from .helpers.paths import PACKAGE

HIDDEN = [
    (
        UserWarning,
        "Starting from v1.9.0, `tensorboardX` has been removed as a dependency of the"
        " `lightning.pytorch` package, due to potential conflicts with other packages",
    ),
    (
        FutureWarning,
        "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)"
        " and treespec.is_leaf()` instead.",
    ),
]
SHOWN = [
    (UserWarning, "The number of training batches (2) is smaller than the logging interval"),
    (DeprecationWarning, "`isinstance(treespec, LeafSpec)` is deprecated"),  # another category
    (UserWarning, "`tensorboardX` is mentioned, but this is another notice"),
]


def test_only_the_listed_warnings_are_hidden() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_third_parties():
            for category, message in HIDDEN + SHOWN:
                warnings.warn(message, category, stacklevel=1)
        for category, message in HIDDEN:  # shown again once the context is closed
            warnings.warn(message, category, stacklevel=1)
    assert [(w.category, str(w.message)) for w in caught] == SHOWN + HIDDEN


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_trainer_logs_its_records_but_not_the_cloud_tip() -> None:
    records = _Records()
    lightning_log = logging.getLogger("lightning.pytorch")
    lightning_log.addHandler(records)
    try:
        with quiet_third_parties():
            L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    finally:
        lightning_log.removeHandler(records)
    assert any(message.startswith("GPU available") for message in records.messages)
    assert not [message for message in records.messages if "Tip" in message], records.messages
    assert not any(logging.getLogger(name).filters for name in _TIP_SOURCES)


IMPORT_EVERY_MODULE = f"""
import importlib, logging, pkgutil, warnings

for name in ("torch", "lightning", "gymnasium", "optuna", "pandas", "jsonargparse"):
    try:  # the third parties' own filters are theirs
        importlib.import_module(name)
    except ImportError:
        pass


def filters():
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    return len(warnings.filters), sum(len(log.filters) for log in [logging.root, *loggers])


before = filters()
package = importlib.import_module("{PACKAGE}")
for module in pkgutil.walk_packages(package.__path__, "{PACKAGE}."):
    if ".tests" not in module.name and not module.name.endswith("__main__"):
        importlib.import_module(module.name)
print(*(after - then for after, then in zip(filters(), before)))
"""


@pytest.mark.slow  # a fresh interpreter, whose filters only these imports have touched
def test_importing_the_package_changes_no_warning_or_logging_filter() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE],
        env=child_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["0", "0"], done.stdout + done.stderr
