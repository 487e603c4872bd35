"""Audit a training script you did not write: ``python -m <package>.audit train.py ARGS``
runs it under :class:`~..core.broadcast.BroadcastGuard` and reports every silent broadcast
of the run, each once with a count, at the user's own line; ``--typecheck PKG`` also checks
the annotations of a package the script imports. See ``docs/audit.md``.

Nothing here is imported by the rest of the package: an unaudited run pays nothing.
"""
