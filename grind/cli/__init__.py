"""The ``grind`` command line: small subcommands that read and write plain text.

Every FILE argument may be ``-`` (stdin / stdout).  Data goes to stdout (or
``-o``), messages and progress to stderr.  Exit status: 0 success, 1 runtime
or input error, 2 usage error, 130 interrupted, 143 terminated (SIGTERM).
Every output path is checked before the command runs (:class:`OutputPath`)
and written by :func:`grind.formats.textio.open_out`.
"""
# Before anything imports numpy (grind.cli.main does): one BLAS thread for
# the command line (grind.cli.threads).  Only the CLI does this; the library
# (import grind, grind.api) leaves the environment alone.
from grind.cli.threads import limit_blas_threads

limit_blas_threads()

from grind.cli.main import Terminated, _terminate, cli, main  # noqa: E402

__all__ = ["cli", "main", "ALGORITHMS", "Terminated", "_terminate"]


def __getattr__(name):
    """``ALGORITHMS`` (grind.cli.train's), imported when asked for: the command line imports
    a command's module only when it runs."""
    if name == "ALGORITHMS":
        from grind.cli.train import ALGORITHMS
        return ALGORITHMS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
