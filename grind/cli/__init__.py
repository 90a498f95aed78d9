"""The ``grind`` command line: small subcommands that read and write plain text.

Every FILE argument may be ``-`` (stdin / stdout).  Data goes to stdout (or
``-o``), messages and progress to stderr.  Exit status: 0 success, 1 runtime
or input error, 2 usage error, 130 interrupted, 143 terminated (SIGTERM), 129 hung up (SIGHUP).
Every output path is checked before the command runs (:class:`OutputPath`)
and written by :func:`grind.formats.textio.open_out`.
"""
# Before anything imports numpy (grind.cli.main does): one BLAS thread for
# the command line (grind.cli.threads).  Only the CLI does this; the library
# (import grind, grind.api) leaves the environment alone.
# Under an address-space limit (ulimit -v), numpy's and scipy's BLAS are loaded
# here, each after a check that it fits: "out of memory", never a hang.
import sys

from grind.cli.threads import limit_blas_threads, load_blas_within_limit

limit_blas_threads()
try:
    load_blas_within_limit()
    from grind.cli.main import Terminated, _terminate, cli, main
except (MemoryError, ImportError) as _e:
    from grind.errors import import_out_of_memory, out_of_memory_message
    if not import_out_of_memory(_e):
        raise
    sys.stderr.write(out_of_memory_message(_e) + "\n")
    raise SystemExit(1) from None

__all__ = ["cli", "main", "ALGORITHMS", "Terminated", "_terminate"]


def __getattr__(name):
    """``ALGORITHMS`` (grind.cli.train's), imported when asked for: the command line imports
    a command's module only when it runs."""
    if name == "ALGORITHMS":
        from grind.cli.train import ALGORITHMS
        return ALGORITHMS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
