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
    """SIGTERM (or SIGHUP: ``hangup``) arrived: raised in the main thread by the command line's signal
    handler, so that ``finally`` / ``except BaseException`` blocks run (``open_out`` deletes its
    temporary file); exit status 143 (129 for SIGHUP)."""

    def __init__(self, hangup: bool = False):
        super().__init__()
        self.hangup = hangup


class Interrupted(BaseException):
    """SIGINT (Ctrl-C) arrived: raised by the command line's handler instead of KeyboardInterrupt, which
    click answers with a blank line on stderr before grind can say "interrupted"; exit status 130."""


#: Set by the SIGTERM and SIGHUP handler (``hangup``: the signal was SIGHUP).  A handler's
#: exception raised while Python runs a finaliser (``__del__``) is swallowed, so long loops
#: also call :func:`check_terminated` between steps: the signal is never lost.
termination = {"requested": False, "hangup": False}


def check_terminated() -> None:
    """Raise :class:`Terminated` if SIGTERM or SIGHUP arrived (see ``termination``)."""
    if termination["requested"]:
        raise Terminated(termination.get("hangup", False))


#: What the dynamic loader says when a shared object does not fit in the address space left (``ulimit -v``).
_NO_ROOM = ("failed to map segment", "cannot allocate memory", "cannot map zero-fill pages")


def import_out_of_memory(e: BaseException) -> bool:
    """Whether a failed import failed for lack of memory (not because the module is missing or unbuilt):
    a MemoryError, or a shared object the loader could not map."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, MemoryError) or any(s in str(e).lower() for s in _NO_ROOM):
            return True
        e = e.__cause__ or e.__context__
    return False


def raise_if_out_of_memory(e: BaseException, what: str) -> None:
    """Re-raise a failed import of ``what`` as MemoryError when memory is why (see
    :func:`import_out_of_memory`), so that no message blames the installation or the build."""
    if import_out_of_memory(e):
        raise MemoryError(f"cannot load {what}: {e}") from e


def out_of_memory_message(e: BaseException) -> str:
    """The command line's one line for a MemoryError (or an import that failed for lack of memory):
    what could not be allocated, when the exception says it."""
    detail = str(e).strip()
    return "grind: error: out of memory" + (f" ({detail})" if detail else "")
