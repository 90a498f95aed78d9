"""Messages and progress on stderr: data goes to stdout, everything else here.

Messages go through Python's :mod:`logging`, logger ``grind``: :func:`info`,
:func:`warn` and :func:`debug` (shown with ``grind -v``).  By default that
logger has one handler, :data:`HANDLER`, writing ``grind: ...`` lines to the
current ``sys.stderr`` (above a progress bar when one is drawn), and does not
pass its records on to the root logger.  From Python (a notebook):

    >>> import logging
    >>> logging.getLogger("grind").setLevel(logging.WARNING)      # silence grind's progress messages
    >>> grind.log.to_application()                                # or: hand them to your own handlers

Progress bars (tqdm) are shown only when stderr is a terminal and not
--quiet, so logs of batch jobs and pipelines stay clean.
"""
from __future__ import annotations

import logging
import sys

_state = {"quiet": False, "bars": 0}

#: The logger every grind message goes through.
LOGGER = logging.getLogger("grind")


def _line(text: str) -> None:
    if _state["bars"]:                  # a bar is drawn: clear it, write the line, draw it again below
        from tqdm import tqdm
        tqdm.write(text, file=sys.stderr)
    else:
        print(text, file=sys.stderr, flush=True)


class StderrHandler(logging.Handler):
    """grind's own lines on the current ``sys.stderr``: ``grind: MESSAGE``, ``grind: warning: MESSAGE``;
    ``stamped``: with the time (``grind -vv``)."""

    def __init__(self, level=logging.NOTSET):
        super().__init__(level)
        self.stamped = False

    def format(self, record) -> str:
        prefix = "grind: warning: " if record.levelno >= logging.WARNING else "grind: "
        stamp = f"{logging.Formatter().formatTime(record, '%H:%M:%S')} " if self.stamped else ""
        return stamp + prefix + record.getMessage()

    def emit(self, record) -> None:
        _line(self.format(record))          # a failing stderr raises here, as a print would


#: The default handler of :data:`LOGGER`.
HANDLER = StderrHandler()
LOGGER.addHandler(HANDLER)
if LOGGER.level == logging.NOTSET:     # a level set before grind.log was first imported (a notebook's) stays
    LOGGER.setLevel(logging.INFO)
LOGGER.propagate = False


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress messages or bars (warnings still shown)."""
    _state["quiet"] = bool(quiet)


def set_verbosity(verbose: int = 0, quiet: bool = False) -> None:
    """The command line's levels: ``-q`` warnings only, default progress messages, ``-v`` also
    :func:`debug` lines, ``-vv`` each line with its time."""
    set_quiet(quiet)
    LOGGER.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    HANDLER.stamped = verbose >= 2


def log_file(path: str) -> logging.Handler:
    """Also write every message (at the current level) to ``path``, each with its date and time; the handler
    (remove it with ``LOGGER.removeHandler``)."""
    h = logging.FileHandler(path, encoding="utf-8")
    h.setFormatter(logging.Formatter("%(asctime)s grind: %(levelname)s: %(message)s"))
    LOGGER.addHandler(h)
    return h


def to_application(on: bool = True) -> None:
    """Hand grind's messages to the application's logging (the root logger's handlers) instead of
    grind's own stderr handler (``on=False``: back to grind's)."""
    LOGGER.propagate = on
    if on:
        LOGGER.removeHandler(HANDLER)
    elif HANDLER not in LOGGER.handlers:
        LOGGER.addHandler(HANDLER)


def debug(msg: str) -> None:
    LOGGER.debug(msg)


def info(msg: str) -> None:
    if not _state["quiet"]:
        LOGGER.info(msg)


def warn(msg: str) -> None:
    LOGGER.warning(msg)


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
