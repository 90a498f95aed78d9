"""The BLAS thread variables the command line runs with.

The numerical work is many small matrices (or grind's own nogil kernels,
threaded with --jobs); BLAS threads only contend for the cores.  An explicit
setting in the environment wins.  Set by the CLI (and ``make bench``) when it
starts, before numpy is imported: ``import grind`` itself changes nothing.
"""
import os

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> None:
    """One BLAS thread unless the environment says otherwise (effective only
    before numpy is first imported)."""
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")


# The heap settings live in the lowest layer (an algorithm's worker code sets them too); the CLI imports them here.
from grind.heap import (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, _mallopt, fix_mmap_threshold,  # noqa: E402,F401
                        freed_blocks_kept, keep_freed_blocks)
