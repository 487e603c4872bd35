"""Where a study lives, and what happens to the trials of a worker that was killed.

``--storage`` is an RDB URL (``sqlite:///sweep.db``, ``postgresql://...``) or
``journal:PATH``, Optuna's append-only journal file: the default, in the study's folder,
which every worker on a shared filesystem can open (optuna>=4.3 takes over the file lock of
a worker that died holding it).

A killed worker leaves its trial RUNNING. RDB storage sends heartbeats, and Optuna marks a
trial FAIL once its heartbeat is older than the grace period. The journal has none, so every
trial records the host and process id of its worker, and :func:`fail_dead_trials`, run when
the study resumes, marks FAIL the RUNNING trials of this host whose process is gone. A
RUNNING trial of another host is left alone and named: this machine cannot tell whether
that worker still runs (on RDB storage its heartbeat settles it). A trial marked FAIL is
never run again: only a fresh sample is.
"""

import os
import socket
import warnings
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from ..errors import UserError

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
"""The trials that count towards ``--trials``."""
HEARTBEAT_SECONDS = 20
GRACE_SECONDS = 60


def open_storage(url: str) -> BaseStorage:
    """The storage that ``--storage URL`` names; a :class:`UserError` if it cannot open."""
    if url.rstrip("/") in ("sqlite:", "sqlite:/") or url.endswith(":memory:"):
        raise UserError(
            f"--storage {url}: an in-memory database dies with its process and no other "
            "worker can open it; name a file: sqlite:///sweep.db"
        )
    try:
        if url.startswith("journal:"):
            path = Path(url.removeprefix("journal:"))
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path)))
        if "://" in url:
            with warnings.catch_warnings():
                # Optuna calls its heartbeat experimental; a sweep user cannot act on that.
                warnings.filterwarnings(
                    "ignore",
                    message=r"Argument ``heartbeat_interval`` is an experimental feature",
                    category=optuna.exceptions.ExperimentalWarning,
                )
                return RDBStorage(
                    url, heartbeat_interval=HEARTBEAT_SECONDS, grace_period=GRACE_SECONDS
                )
    except (ImportError, OSError, ValueError) as error:
        raise UserError(f"--storage {url}: {_first_line(error)}") from error
    except Exception as error:  # SQLAlchemy's errors: a bad URL, a database it cannot reach
        raise UserError(f"--storage {url}: {type(error).__name__}: {_first_line(error)}") from error
    raise UserError(f"--storage {url}: give an RDB URL (sqlite:///FILE) or journal:PATH")


def _first_line(error: Exception) -> str:
    """The first line of ``error``'s message: SQLAlchemy adds the statement and a link on
    lines of their own, and a refusal is one line."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def running_here(study: optuna.Study) -> int:
    """The RUNNING trials whose worker runs on this host and is alive: each will finish.

    A RUNNING trial of another host is not counted, since this machine cannot tell whether
    its worker still runs, nor is one that has not yet recorded its worker."""
    host = socket.gethostname()
    return sum(
        1
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if (worker := trial.user_attrs.get("worker", {})).get("host") == host
        and _alive(int(worker["pid"]))
    )


def fail_dead_trials(study: optuna.Study) -> None:
    """Mark FAIL every RUNNING trial whose worker ran on this host and is gone."""
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker", {})
        if worker.get("host") != host:
            where = f"on {worker['host']}" if worker else "by an unknown worker"
            print(f"trial {trial.number} is RUNNING {where}; left as it is", flush=True)
        elif not _alive(int(worker["pid"])):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            print(
                f"trial {trial.number}: its worker (pid {worker['pid']}) is gone; marked FAIL",
                flush=True,
            )


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie, killed but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
