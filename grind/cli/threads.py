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


#: glibc's ``mallopt`` parameter number of the mmap threshold.
M_MMAP_THRESHOLD = -3


def fix_mmap_threshold(size: int = 128 * 1024) -> bool:
    """Keep glibc's malloc from raising its mmap threshold (default 128 KiB)
    after the first large block is freed (it then grows to 32 MiB): blocks of
    at least ``size`` bytes stay separate mappings, returned to the system
    when freed.  Otherwise the pieces of a large grammar read in chunks
    (hundreds of KiB each, kept while their temporaries are freed) leave
    the heap fragmented: ~50% more resident memory at the peak of reading a
    5M-rule grammar.  Not glibc, or no ``mallopt``: nothing changes (False).
    ``MALLOC_MMAP_THRESHOLD_`` in the environment wins."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes
        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, size))
    except (OSError, AttributeError):
        return False
