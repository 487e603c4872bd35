"""A stand-in SLURM allocation of 2 nodes x 1 task on this machine, to run
``slurm/train.sbatch`` as the cluster would: ``srun`` and ``scontrol`` scripts on ``PATH``
and the ``SLURM_*`` variables, so that Lightning detects SLURM and the two tasks meet over
gloo on the loopback address. ``srun`` starts ``SLURM_NTASKS`` copies of its command, with
the ranks SLURM gives a task, and writes their process ids to ``tasks.txt``; ``scontrol``
records its arguments in ``scontrol.txt`` and, for ``requeue``, kills the tasks, as SLURM
ends a running job that it requeues.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..project import PROJECT_ROOT, child_environment

SLURM = PROJECT_ROOT / "slurm"
STAND_INS = {
    "srun": """#!/bin/bash
tasks=()
for ((rank = 0; rank < SLURM_NTASKS; rank++)); do
    SLURM_PROCID=$rank SLURM_LOCALID=$((rank % SLURM_NTASKS_PER_NODE)) \\
        SLURM_NODEID=$((rank / SLURM_NTASKS_PER_NODE)) "$@" &
    tasks+=($!)
done
echo "${tasks[@]}" > "$STAND_IN/tasks.txt"
status=0
for task in "${tasks[@]}"; do wait "$task" || status=$?; done
exit $status
""",
    "scontrol": """#!/bin/bash
echo "$@" >> "$STAND_IN/scontrol.txt"
if [[ $1 == requeue ]]; then kill -9 $(cat "$STAND_IN/tasks.txt"); fi
""",
    "python": f"""#!/bin/bash
exec {sys.executable} "$@"
""",
}


def environment() -> dict[str, str]:
    """This source tree importable."""
    return child_environment()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Allocation:
    """Two nodes of one task each, job ``job_id``; ``folder`` holds the stand-ins."""

    def __init__(self, folder: Path, job_id: int = 4242) -> None:
        self.folder = folder
        (folder / "bin").mkdir(parents=True, exist_ok=True)
        for name, text in STAND_INS.items():
            (folder / "bin" / name).write_text(text)
            (folder / "bin" / name).chmod(0o755)
        self.env = {
            **environment(),
            "PATH": f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "STAND_IN": str(folder),
            "SLURM_JOB_ID": str(job_id),
            "SLURM_JOB_NAME": "train",
            "SLURM_NNODES": "2",
            "SLURM_NTASKS": "2",
            "SLURM_NTASKS_PER_NODE": "1",
            "SLURM_NODELIST": "127.0.0.1",
            "SLURM_SUBMIT_DIR": str(PROJECT_ROOT),
        }

    def start(self, args: list[str], output: Path) -> subprocess.Popen:
        """``bash slurm/train.sbatch ARGS`` on a free port, its output in ``output``."""
        (self.folder / "tasks.txt").unlink(missing_ok=True)
        env = {**self.env, "MASTER_PORT": str(free_port())}
        with output.open("w") as handle:
            command = ["bash", str(SLURM / "train.sbatch"), *args]
            return subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT)

    def run(self, args: list[str], output: Path) -> int:
        return self.start(args, output).wait(timeout=240)

    def preempt(self, job: subprocess.Popen, root: Path) -> list[str]:
        """Once the run has saved ``last.ckpt`` in ``root``, send every task SIGUSR1 (as
        ``#SBATCH --signal`` does, not to the script); the calls of ``scontrol`` once the
        job has ended."""
        wait_for(root / "checkpoints" / "last.ckpt", job)
        for pid in (self.folder / "tasks.txt").read_text().split():
            os.kill(int(pid), signal.SIGUSR1)
        assert job.wait(timeout=120) != 0, "the run ended before the signal reached it"
        calls = self.folder / "scontrol.txt"
        return calls.read_text().splitlines() if calls.exists() else []


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    """Return once ``path`` exists; fail if ``process`` ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the run ended (status {process.returncode}) before {path}"
        assert time.monotonic() < deadline, f"no {path} after {timeout} s"
        time.sleep(0.02)
