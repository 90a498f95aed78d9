"""Messages and progress on stderr: data goes to stdout, everything else here.

Progress bars (tqdm) are shown only when stderr is a terminal and not --quiet,
so logs of batch jobs and pipelines stay clean.
"""
from __future__ import annotations

import sys

_state = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    _state["quiet"] = bool(quiet)


def info(msg: str) -> None:
    if not _state["quiet"]:
        print(f"grind: {msg}", file=sys.stderr, flush=True)


def warn(msg: str) -> None:
    print(f"grind: warning: {msg}", file=sys.stderr, flush=True)


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


def bar(**kw):
    """A tqdm progress bar on stderr when it is a terminal (and not --quiet),
    else an object with the same methods that does nothing."""
    if _state["quiet"] or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm
    return tqdm(file=sys.stderr, leave=False, **kw)
