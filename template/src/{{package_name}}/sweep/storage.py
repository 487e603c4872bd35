"""Where a study lives, and what happens to the trials of a worker that was killed.

``--storage`` is an RDB URL or ``journal:PATH``, Optuna's append-only journal file (the
default), which every worker on a shared filesystem can open.

A killed worker leaves its trial RUNNING, and Optuna's heartbeat, which marks such a trial
FAIL, exists only for RDB storage. So every trial records the host, process id and start
time of its worker, and :func:`fail_dead_trials` marks FAIL the RUNNING trials of this host
whose process is gone. One of another host is left alone: this machine cannot tell whether
its worker still runs.
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

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
"""The trials that count towards ``--trials``."""


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
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, heartbeat_interval=20, grace_period=60)
    except Exception as error:  # SQLAlchemy's too: a bad URL, a database it cannot reach
        # SQLAlchemy adds the statement and a link on lines of their own; a refusal is one.
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise UserError(f"--storage {url}: {type(error).__name__}: {first_line}") from error
    raise UserError(f"--storage {url}: give an RDB URL (sqlite:///FILE) or journal:PATH")


def finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def running_here(study: optuna.Study) -> int:
    """The RUNNING trials whose worker runs on this host and is alive: each will finish.
    One of another host, or that has not yet recorded its worker, is not counted."""
    host = socket.gethostname()
    return sum(
        1
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if (worker := trial.user_attrs.get("worker", {})).get("host") == host and _alive(worker)
    )


def fail_dead_trials(study: optuna.Study) -> None:
    """Mark FAIL every RUNNING trial whose worker ran on this host and is gone."""
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker", {})
        if worker.get("host") != host:
            where = f"on {worker['host']}" if worker else "by an unknown worker"
            print(f"trial {trial.number} is RUNNING {where}; left as it is", flush=True)
        elif not _alive(worker):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            print(
                f"trial {trial.number}: its worker (pid {worker['pid']}) is gone; marked FAIL",
                flush=True,
            )


def this_worker() -> dict[str, Any]:
    """What a trial records of the process that runs it. The start time, where the system
    gives it, keeps a later process given the same id (a container's first process is
    always 1) from being taken for it."""
    stat = _stat(os.getpid())
    started = stat[19] if stat else None
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": started}


def _alive(worker: dict[str, Any]) -> bool:
    """Whether the worker that ``this_worker()`` described still runs on this host.

    Never this process: it asks only while it runs no trial itself. A zombie (killed, not
    yet reaped) is gone. Without /proc, any process with that id counts as alive."""
    pid = int(worker["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: its start time still says whether it is ours
        pass
    stat = _stat(pid)
    if stat is None:  # no /proc (macOS): the process id is all there is
        return True
    started = worker.get("started")
    return stat[0] != "Z" and (started is None or stat[19] == started)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None: the state first, and
    at 19 when the process started, in clock ticks since boot."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None
