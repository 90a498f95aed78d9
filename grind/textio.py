"""Reading and writing text: ``-`` is stdin/stdout, ``.gz`` is transparent,
output files are written atomically, and every output starts with a header.

The header records the grind version, the command line and the seed, so any
file says which command and options made it.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
import tempfile

from . import __version__
from .errors import InputError

_run_info = {"argv": None, "seed": None}


def set_run_info(argv=None, seed=None) -> None:
    """Record the command line and seed for the headers of files written later."""
    if argv is not None:
        _run_info["argv"] = list(argv)
    _run_info["seed"] = seed


def header_lines(**extra) -> list[str]:
    """``# grind VERSION``, ``# command: ...``, ``# seed: ...`` and ``# key: value`` lines."""
    argv = _run_info["argv"] or sys.argv
    cmd = " ".join(["grind"] + [_quote(a) for a in argv[1:]])
    lines = [f"# grind {__version__}", f"# command: {cmd}", f"# seed: {_run_info['seed']}"]
    lines += [f"# {k}: {v}" for k, v in extra.items() if v is not None]
    return [ln + "\n" for ln in lines]


def _quote(a: str) -> str:
    return a if a and all(c.isalnum() or c in "-_./=:,+@%" for c in a) else repr(a)


def open_binary(path: str):
    """A byte stream for ``path`` (``-`` = stdin; ``.gz``/``.xz`` decompressed)."""
    if path == "-":
        return sys.stdin.buffer
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rb")
        if path.endswith(".xz"):
            import lzma
            return lzma.open(path, "rb")
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def read_lines(path: str):
    """Yield (line number, line) of a UTF-8 text file; bad bytes name file and line."""
    name = "<stdin>" if path == "-" else path
    f = open_binary(path)
    lineno = 0
    try:
        for lineno, raw in enumerate(f, 1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{name}:{lineno}: not valid UTF-8 ({e.reason})") from None
    except (OSError, EOFError) as e:
        raise InputError(f"{name}: cannot read: {e}") from None
    finally:
        if path != "-":
            f.close()


@contextlib.contextmanager
def open_out(path: str):
    """A text stream that becomes ``path`` only when the block ends without error.

    ``-`` writes to stdout.  Otherwise the text goes to a temporary file in the
    same directory, which is renamed over ``path`` at the end (atomic on POSIX);
    ``.gz`` paths are gzip-compressed.
    """
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".grind-", dir=d)
    try:
        with os.fdopen(fd, "wb") as raw:
            stream = raw
            if path.endswith(".gz"):
                stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
            with io.TextIOWrapper(stream, encoding="utf-8") as f:
                yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
