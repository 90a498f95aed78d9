"""Messages and progress on stderr: data goes to stdout, everything else here.

Progress bars (tqdm) are shown only when stderr is a terminal and not --quiet,
so logs of batch jobs and pipelines stay clean.
"""
from __future__ import annotations

import sys

_state = {"quiet": False, "bars": 0}


def set_quiet(quiet: bool) -> None:
    _state["quiet"] = bool(quiet)


def _line(text: str) -> None:
    if _state["bars"]:                  # a bar is drawn: clear it, write the line, draw it again below
        from tqdm import tqdm
        tqdm.write(text, file=sys.stderr)
    else:
        print(text, file=sys.stderr, flush=True)


def info(msg: str) -> None:
    if not _state["quiet"]:
        _line(f"grind: {msg}")


def warn(msg: str) -> None:
    _line(f"grind: warning: {msg}")


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
    return _Bar(tqdm(file=sys.stderr, leave=False, **kw))


class _Bar:
    """A tqdm bar that, while open, makes :func:`info` and :func:`warn` write above it."""

    def __init__(self, bar):
        self._bar, self._open = bar, True
        _state["bars"] += 1

    def update(self, n=1):
        self._bar.update(n)

    def set_postfix_str(self, s):
        self._bar.set_postfix_str(s)

    def close(self):
        if self._open:
            self._open = False
            _state["bars"] -= 1
            self._bar.close()
