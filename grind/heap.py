"""glibc malloc settings for grind's large temporaries (``mallopt``): the CLI's
(:func:`fix_mmap_threshold`) and the logistic normal's (:func:`keep_freed_blocks`).
A module of the lowest layer, so that both the command line and an algorithm's
worker-side code (a Dask worker's logistic-normal shard) can set them.
"""
import contextlib
import os

#: glibc's ``mallopt`` parameter numbers of the heap trim threshold and the mmap threshold.
M_TRIM_THRESHOLD = -1
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
    return _mallopt(M_MMAP_THRESHOLD, size)


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt(param, value)``; False where there is none (not glibc; Windows' CDLL(None) is a TypeError)."""
    try:
        import ctypes
        return bool(ctypes.CDLL(None).mallopt(param, value))
    except (OSError, AttributeError, TypeError):
        return False


def keep_freed_blocks(mmap: int = 32 << 20, trim: int = 256 << 20, force: bool = False) -> bool:
    """For work that allocates and frees large temporaries many times a second
    (the logistic-normal E-step's arrays over every multinomial of 256 sentences,
    ~20 MB each): blocks under ``mmap`` bytes come from the heap, and up to
    ``trim`` bytes of freed heap are kept for the next allocation, instead of
    every block being a fresh mapping whose pages the kernel zeroes again
    (:func:`fix_mmap_threshold`).  Measured on an LN-I families iteration over
    the 537 WSJ10 sentences: system time 3.3 s -> 0.26 s of 8.3 s of CPU, peak
    resident memory +60 MB.  Called after the corpus and grammar are read (their
    fragmentation is what :func:`fix_mmap_threshold` guards).  Not glibc, or no
    ``mallopt``: nothing changes (False); ``MALLOC_MMAP_THRESHOLD_`` or
    ``MALLOC_TRIM_THRESHOLD_`` in the environment wins unless ``force`` (a Dask
    worker, whose nanny sets ``MALLOC_TRIM_THRESHOLD_=65536`` itself: the
    logistic-normal shards ran 1.8x slower there)."""
    if not force and ("MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ):
        return False
    return _mallopt(M_MMAP_THRESHOLD, mmap) and _mallopt(M_TRIM_THRESHOLD, trim)


@contextlib.contextmanager
def freed_blocks_kept(force: bool = False, trim_after: int = 128 * 1024):
    """:func:`keep_freed_blocks` inside the block, and the CLI's settings again after it
    (mmap threshold :func:`fix_mmap_threshold`, trim threshold ``trim_after``, glibc's
    default 128 KiB): for a process that goes on to other work, e.g. the benchmarks after
    the LN one, or a Dask worker."""
    changed = keep_freed_blocks(force=force)
    try:
        yield changed
    finally:
        if changed:
            fix_mmap_threshold()
            _mallopt(M_TRIM_THRESHOLD, trim_after)
