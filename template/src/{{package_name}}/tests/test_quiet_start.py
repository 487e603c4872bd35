"""The command lines print nothing from third parties that a user cannot act on, and
hide nothing else: ``cli.quiet_third_parties`` filters three notices by category and
message, and Lightning's cloud tips by message on the logger that emits them.
(The command lines' own output is checked in ``helpers.command_line.fit_summary``.)"""

import logging
import warnings

import lightning as L

from ..cli import quiet_third_parties

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
        quiet_third_parties()
        for category, message in HIDDEN + SHOWN:
            warnings.warn(message, category, stacklevel=1)
    assert [(w.category, str(w.message)) for w in caught] == SHOWN


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_trainer_logs_its_records_but_not_the_cloud_tip() -> None:
    quiet_third_parties()
    records = _Records()
    lightning_log = logging.getLogger("lightning.pytorch")
    lightning_log.addHandler(records)
    try:
        L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    finally:
        lightning_log.removeHandler(records)
    assert any(message.startswith("GPU available") for message in records.messages)
    assert not [message for message in records.messages if "Tip" in message], records.messages
