"""What every test of a user's mistake checks: the output ends in one line, ``error: <what
is wrong>``, the exit status is 2, and no traceback is printed (``errors.user_errors``)."""

from collections.abc import Callable

import pytest


def refusal(capsys: pytest.CaptureFixture[str], run: Callable[[], object]) -> str:
    """The last line of stderr of ``run()``, a command line called in this process that must
    exit with status 2 after a one-line ``error:``, and print no traceback."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run()
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    return refused_line(err.splitlines())


def refused_line(lines: list[str]) -> str:
    """The last of a refused command's output ``lines``, checked: an ``error:`` line, with no
    traceback before it."""
    assert not any(line.startswith("Traceback") for line in lines), "\n".join(lines[-30:])
    last = [line for line in lines if line.strip()][-1]
    assert last.startswith("error: "), "\n".join(lines[-30:])
    return last
