"""What a corpus shard of ``grind split`` says about itself, and the check that it still holds.

A shard's header gives the blocks and the sentences the split put in it (``# blocks:``,
``# sentences:``, the latter as read with the split's corpus options) and, as its last line,
``# shard-sha256:``: the SHA-256 (16 hex digits) of every byte after that line.  A shard cut or
edited after the split is refused (its counts would no longer add up to the corpus's).
"""
from __future__ import annotations

import hashlib
import lzma

from grind.errors import InputError
from grind.formats.corpus import CorpusSpec, iter_blocks
from grind.formats.textio import is_stream, open_binary, read_lines

#: The header key of a shard's content hash (the last line of its header).
HASH_KEY = "shard-sha256"
#: The advice of every refusal.
AGAIN = "cut the corpus again with grind split (or restore the shard as it was written)"


def content_hash():
    """The hash object :data:`HASH_KEY` is made with (fed the UTF-8 bytes after the header line)."""
    return hashlib.sha256()


def hex_of(h) -> str:
    """The header value of a hash object of :func:`content_hash`."""
    return h.hexdigest()[:16]


def check_shard(path: str, header: dict, spec: CorpusSpec, fmt: str, sentences: int | None = None) -> None:
    """InputError when the shard ``path`` no longer holds what its ``header`` says: other bytes after
    its header (``# shard-sha256:``; a shard written before that line was added: its number of
    blocks, read again), or (``sentences``: how many were read with the split's corpus options)
    another number of sentences.  Standard input and a pipe are not checked (they cannot be read twice)."""
    if is_stream(path) or "shard" not in header:
        return
    said = header.get("sentences")
    if sentences is not None and said is not None and said.isdigit() and int(said) != sentences:
        raise InputError(f"{path}: grind split wrote {said} sentences into this shard (its '# sentences:' line), "
                         f"but {sentences} are read from it: it was cut or edited after the split; {AGAIN}")
    want = header.get(HASH_KEY)
    if want is not None:
        got = _hash_after_header(path)
        if got != want:
            raise InputError(f"{path}: this shard is not what grind split wrote: its content after the header has "
                             f"SHA-256 {got or '(no content)'}, its '# {HASH_KEY}:' line says {want} (cut or "
                             f"edited after the split?); {AGAIN}")
        return
    blocks = header.get("blocks")
    if blocks is not None and blocks.isdigit():
        n = sum(1 for _ in iter_blocks(path, spec, fmt, read_lines(path)))
        if n != int(blocks):
            raise InputError(f"{path}: grind split wrote {blocks} blocks into this shard (its '# blocks:' line), "
                             f"but it holds {n}: it was cut or edited after the split; {AGAIN}")


def _hash_after_header(path: str) -> str | None:
    """:func:`hex_of` the bytes after the ``# shard-sha256:`` line of ``path``'s header (None: no such line)."""
    key = f"# {HASH_KEY}: ".encode()
    h = None
    f = open_binary(path)
    try:
        for raw in f:
            if h is not None:
                h.update(raw)
            elif raw.startswith(key):
                h = content_hash()
            elif not raw.startswith(b"#"):
                return None
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    finally:
        f.close()
    return hex_of(h) if h is not None else None
