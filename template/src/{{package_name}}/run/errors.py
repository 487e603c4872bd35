"""One line for a user's mistake: raise :class:`UserError`, and the command line prints
``error: <message>`` and exits with status 2, the parser's convention for a bad option,
rather than a traceback through frames the user never wrote. Every other exception keeps
its traceback and exit status 1. ``SHOW_TRACEBACK=1`` prints a UserError's traceback too."""

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager


class UserError(Exception):
    """A mistake in a run's inputs or files; its message names the file or option."""


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except UserError as error:
        if os.environ.get("SHOW_TRACEBACK") == "1":
            traceback.print_exc()
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
