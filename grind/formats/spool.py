"""A corpus's sentences kept on disk and read back by number: what a
minibatch algorithm that visits the sentences in a random order holds
instead of the corpus (issue 15: stochastic VB never holds the corpus).

:class:`TokenSpool` writes each sentence's tokens, as the corpus reader
made them, to an unnamed temporary file (one line a sentence, tokens
separated by tabs, UTF-8) and keeps the byte offset where each starts.
Reading a sentence back is one ``pread`` at its offset, so a minibatch of
sentences anywhere in the corpus costs its own size, whatever the corpus's.

Why a spool of tokens rather than offsets into the corpus file itself: the
same code serves every input -- a plain file, standard input, a ``.gz`` /
``.xz`` / ``.bz2`` file (none of which can be read at an offset) -- and
every format and option (a PTB line may hold several trees, CoNLL comments
and multiword ranges, ``--punct``, ``--types``, ``--chars``): the sentences
come from the corpus reader once, and the spool holds exactly the tokens it
produced (so the parsers built from it see what the in-memory path saw).
The file is a fraction of a treebank's size (the tokens without the other
columns: ~40 MB for the 664,000-sentence Fisher-sized CoNLL-U corpus).

Held in memory: the offsets, one int64 a sentence (8 bytes a sentence; made
in chunks of :data:`CHUNK` while writing and joined once at the end, so 16
bytes a sentence at that moment), and a write buffer.  On disk: the tokens,
in a file with no name (``tempfile.TemporaryFile`` in ``$TMPDIR``): it is
gone when the spool is closed, when the process exits, and when it is
killed.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from grind.errors import InputError

#: Offsets are collected in arrays of this many sentences while writing.
CHUNK = 1 << 16
#: Separates a sentence's tokens in the spool (no corpus reader makes a token with it).
SEP = "\t"


class TokenSpool:
    """Sentences' tokens in an unnamed temporary file, read back by number.

    Write with :meth:`add` (sentence 0, 1, ...), then :meth:`close_writing`;
    read with :meth:`read`.  A context manager: :meth:`close` (on exit, also
    on error) deletes the file.  See the module doc for what it holds.
    """

    def __init__(self, dir: str | None = None):
        self._file = tempfile.TemporaryFile(prefix="grind-spool-", dir=dir)
        self._chunks: list[np.ndarray] = []
        self._cur = np.zeros(CHUNK, dtype=np.int64)
        self._k = 0                      # entries of _cur used
        self._pos = 0                    # bytes written
        self._n = 0
        self.offsets: np.ndarray | None = None   # n + 1 byte offsets, after close_writing

    def add(self, tokens) -> None:
        """Append one sentence (a list of token strings)."""
        line = SEP.join(tokens)
        if tokens and line.count(SEP) != len(tokens) - 1:
            raise InputError(f"a token holds a tab character ({[t for t in tokens if SEP in t][0]!r}): "
                             "cannot spool the corpus")
        # an empty sentence is an empty entry; any other ends with a newline
        data = line.encode("utf-8", "surrogatepass") + b"\n" if tokens else b""
        self._file.write(data)
        if self._k == CHUNK:
            self._chunks.append(self._cur)
            self._cur, self._k = np.zeros(CHUNK, dtype=np.int64), 0
        self._cur[self._k] = self._pos
        self._k += 1
        self._pos += len(data)
        self._n += 1

    def close_writing(self) -> None:
        """End of the sentences: the offsets are joined, the file flushed."""
        self._file.flush()
        self.offsets = np.concatenate(self._chunks + [self._cur[:self._k], np.array([self._pos], dtype=np.int64)])
        self._chunks, self._cur = [], np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """Bytes of the file."""
        return self._pos

    def read(self, idx) -> list[list[str]]:
        """The tokens of sentences ``idx`` (numbers from 0, in the order given)."""
        if self.offsets is None:
            raise RuntimeError("TokenSpool.read before close_writing")
        fd, off = self._file.fileno(), self.offsets
        out: list[list[str]] = []
        for i in np.asarray(idx, dtype=np.int64).tolist():
            lo, hi = int(off[i]), int(off[i + 1])
            if hi == lo:
                out.append([])
                continue
            data = os.pread(fd, hi - lo - 1, lo)
            out.append(data.decode("utf-8", "surrogatepass").split(SEP))
        return out

    def close(self) -> None:
        """Delete the file (idempotent)."""
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
