"""Errors grind reports to the user as one line (no traceback).

InputError: bad input data (exit status 1).  NumericalError: a run reached a
NaN or a zero-probability state (exit status 1).  Usage errors are click's
(exit status 2).
"""


class GrindError(Exception):
    """Base class of errors shown to the user as a one-line message."""


class InputError(GrindError):
    """A file is malformed or inconsistent with another; the message names file and line."""


class NumericalError(GrindError):
    """NaN, infinity or a zero-probability state where a probability is needed."""


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread by the command line's signal
    handler, so that ``finally`` / ``except BaseException`` blocks run
    (``open_out`` deletes its temporary file); exit status 143."""


class Interrupted(BaseException):
    """SIGINT (Ctrl-C) arrived: raised by the command line's handler instead of KeyboardInterrupt, which
    click answers with a blank line on stderr before grind can say "interrupted"; exit status 130."""


#: Set by the SIGTERM handler.  A handler's exception raised while Python runs
#: a finaliser (``__del__``) is swallowed, so long loops also call
#: :func:`check_terminated` between steps: the signal is never lost.
termination = {"requested": False}


def check_terminated() -> None:
    """Raise :class:`Terminated` if SIGTERM arrived (see ``termination``)."""
    if termination["requested"]:
        raise Terminated()
