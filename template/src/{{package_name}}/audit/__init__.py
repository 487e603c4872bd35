"""Audit a training script you did not write: ``python -m <package>.audit train.py ARGS``
runs it as Python would, under :class:`~..core.broadcast.BroadcastGuard`, and reports every silent
broadcast of the run, each once with a count, at the user's own line; ``--typecheck PKG``
also checks the annotations of a package the script imports. See ``docs/audit.md``.

- :mod:`.command`: the command line, running the program and the exit status.
- :mod:`.findings`: what a finding holds, the line it is attributed to, the JSON report.
- :mod:`.annotations`: the typechecker behind ``--typecheck``, which records violations.

Nothing here is imported by the rest of the package: an unaudited run pays nothing.
"""
