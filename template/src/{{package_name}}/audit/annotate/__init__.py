"""``python -m <package>.audit.annotate``: type an existing codebase from its own runs."""
