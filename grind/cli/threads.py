"""The BLAS thread variables the command line runs with.

The numerical work is many small matrices (or grind's own nogil kernels,
threaded with --jobs); BLAS threads only contend for the cores.  An explicit
setting in the environment wins.  Set by the CLI (and ``make bench``) when it
starts, before numpy is imported: ``import grind`` itself changes nothing.
Under an address-space limit the command line also loads the BLAS first,
checked (:func:`load_blas_within_limit`).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> None:
    """One BLAS thread unless the environment says otherwise (effective only
    before numpy is first imported)."""
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")


#: Address space each OpenBLAS thread takes when its library loads: a 32 MiB buffer and a thread stack.
BLAS_THREAD_BYTES = 40 << 20
#: Address space loading a BLAS-linked package takes besides its shared objects and the threads: its other
#: extension modules and heap (measured: ~25 MiB for numpy and for scipy.linalg; kept twice that).
LOAD_SLACK_BYTES = 48 << 20
#: Size assumed for a package's shared libraries when they are not shipped beside it (a system BLAS).
UNKNOWN_LIBS_BYTES = 64 << 20
#: The packages whose import loads a BLAS, the first module of each that loads it, and the folder
#: of shared objects a wheel ships beside the package.
BLAS_PACKAGES = (("numpy", "numpy", "numpy.libs"), ("scipy", "scipy.linalg", "scipy.libs"))


def load_blas_within_limit() -> None:
    """Under an address-space limit (``ulimit -v``), load numpy's and scipy's BLAS now, each only
    after checking that the limit leaves room for it.  OpenBLAS retries a buffer that does not fit
    forever, in C, where no signal handler runs (SIGTERM is ignored): a command must stop with
    "out of memory" instead.  Without a limit, or with the packages loaded already, nothing happens.
    Raises MemoryError (naming what would not fit)."""
    limit = address_space_limit()
    if limit is None:
        return
    from grind.errors import import_out_of_memory
    for package, module, libs in BLAS_PACKAGES:
        if module in sys.modules:
            continue
        need = _libs_bytes(package, libs) + blas_threads() * BLAS_THREAD_BYTES + LOAD_SLACK_BYTES
        if not _room_for(need):
            left = _address_space_left(limit)
            raise MemoryError(f"loading {package} and its BLAS ({blas_threads()} thread(s)) needs about "
                              f"{need >> 20} MB of address space; the limit (ulimit -v {limit >> 10}) leaves "
                              + (f"{left >> 20} MB" if left is not None else "less"))
        try:
            importlib.import_module(module)
        except ImportError as e:
            if import_out_of_memory(e):
                raise MemoryError(f"cannot load {package} within the address-space limit (ulimit -v "
                                  f"{limit >> 10})") from e
            raise


def address_space_limit() -> int | None:
    """The soft address-space limit in bytes (``ulimit -v``), None when there is none (or no ``resource``)."""
    try:
        import resource
    except ImportError:                       # not Unix
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def blas_threads() -> int:
    """The threads OpenBLAS will start: its variable (or OMP_NUM_THREADS), at most one a core."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        try:
            n = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if n > 0:
            return min(n, os.cpu_count() or n)
    return os.cpu_count() or 1


def _libs_bytes(package: str, libs: str) -> int:
    """Bytes of the shared objects a wheel of ``package`` ships in ``libs`` beside it."""
    spec = importlib.util.find_spec(package)
    where = os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else None
    folder = os.path.join(where, libs) if where else None
    if not folder or not os.path.isdir(folder):
        return UNKNOWN_LIBS_BYTES
    return sum(e.stat().st_size for e in os.scandir(folder) if e.is_file())


def _room_for(size: int) -> bool:
    """Whether a mapping of ``size`` bytes fits in the address space left (mapped and released, never touched)."""
    import mmap
    try:
        mmap.mmap(-1, size).close()
    except (OSError, MemoryError):
        return False
    return True


def _address_space_left(limit: int) -> int | None:
    """Bytes of address space left under ``limit`` (Linux: /proc/self/statm), None when unknown."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, limit - pages * os.sysconf("SC_PAGE_SIZE"))


# The heap settings live in the lowest layer (an algorithm's worker code sets them too); the CLI imports them here.
from grind.heap import (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, _mallopt, fix_mmap_threshold,  # noqa: E402,F401
                        freed_blocks_kept, keep_freed_blocks)
