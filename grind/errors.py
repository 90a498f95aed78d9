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
