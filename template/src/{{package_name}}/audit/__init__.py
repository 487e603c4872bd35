"""Audit a script you did not write: ``python -m <package>.audit train.py ARGS`` (docs/audit.md).
Nothing here is imported by the rest of the package: an unaudited run pays nothing."""
