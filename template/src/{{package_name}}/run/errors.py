"""One line for a user's mistake: raise :class:`UserError`, and the command line prints
``error: <message>`` and exits with status 2, the parser's convention for a bad option.

Such a mistake is often found under frames the user never wrote, whose traceback hides the
one line that matters. Every other exception is a bug or a diverging run and keeps its
traceback and exit status 1. ``SHOW_TRACEBACK=1`` prints a UserError's traceback too.
"""

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager


class UserError(Exception):
    """A mistake in a run's inputs or files; its message names the file or option."""


@contextmanager
def user_errors() -> Iterator[None]:
    """Print a :class:`UserError` raised inside as one line on stderr and exit with 2."""
    try:
        yield
    except UserError as error:
        if os.environ.get("SHOW_TRACEBACK") == "1":
            traceback.print_exc()
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
