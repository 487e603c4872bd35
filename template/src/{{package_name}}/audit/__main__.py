"""``python -m <package>.audit [options] SCRIPT [ARGS...]``; see :mod:`.command`."""

from .command import main

if __name__ == "__main__":
    raise SystemExit(main())
