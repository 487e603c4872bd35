"""``python -m <package>.audit [options] SCRIPT [ARGS...]``; see :mod:`.command`."""

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
