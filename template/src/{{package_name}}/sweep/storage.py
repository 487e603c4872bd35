"""Where a study lives (``--storage``), and what becomes of the trial of a killed worker.

A killed worker leaves its trial RUNNING, and Optuna's heartbeat, which marks such a trial
FAIL, exists only for RDB storages. So each trial records its worker's host, process id and
start time, and :func:`fail_dead_trials` marks FAIL the RUNNING trials of this host whose
worker is gone. Another host's are left alone: this one cannot tell if their worker runs.
"""

import os
import socket
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from ..run.errors import UserError


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
            with warnings.catch_warnings():  # Optuna calls its heartbeat experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, heartbeat_interval=20, grace_period=60)
    except Exception as error:  # SQLAlchemy's too: a bad URL, a database it cannot reach
        # SQLAlchemy adds the statement and a link on lines of their own.
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise UserError(f"--storage {url}: {type(error).__name__}: {first_line}") from error
    raise UserError(f"--storage {url}: give an RDB URL (sqlite:///FILE) or journal:PATH")


def finished(study: optuna.Study) -> int:
    """The trials that count towards ``--trials``."""
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def running_here(study: optuna.Study) -> int:
    """The RUNNING trials whose worker runs on this host and is alive: each will finish."""
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return sum(_alive(trial.user_attrs.get("worker", {})) for trial in running)


def fail_dead_trials(study: optuna.Study) -> None:
    """Mark FAIL every RUNNING trial whose worker ran on this host and is gone."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker", {})
        if worker.get("host") != socket.gethostname():
            where = f"on {worker['host']}" if worker else "by an unknown worker"
            print(f"trial {trial.number} is RUNNING {where}; left as it is")
        elif not _alive(worker):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            print(f"trial {trial.number}: its worker (pid {worker['pid']}) is gone; marked FAIL")


def this_worker() -> dict[str, Any]:
    """What a trial records of its worker. The start time keeps a later process given the
    same id (a container's first process is always 1) from being taken for it."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": _stat(os.getpid())[1]}


def _alive(worker: dict[str, Any]) -> bool:
    """Whether the worker that ``this_worker()`` described runs on this host, still. Never
    this process: it asks only while it runs no trial itself. A zombie (killed, not yet
    reaped) is gone; without /proc (macOS), any process with that id counts as alive."""
    pid = worker.get("pid", 0)
    if worker.get("host") != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: its start time still says whether it is ours
        pass
    state, started = _stat(pid)
    return state != "Z" and worker.get("started") in (None, started)


def _stat(pid: int) -> tuple[str | None, str | None]:
    """A process's state and its start time in clock ticks since boot, from /proc/PID/stat;
    None for what the system does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], fields[19]
    except (OSError, IndexError):
        return None, None
