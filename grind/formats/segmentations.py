"""Segmentation files: one segmented word a line.

Two line formats, told apart by a TAB (one format a file):

* plain: the morphs separated by single spaces, ``ab dik ova t``; the word is
  their concatenation;
* sigmorphon (SIGMORPHON 2022 word-level): ``abdikovat<TAB>ab @@dik @@ova @@t``,
  every morph after the first prefixed with ``@@``; the morphs must
  concatenate to the word (surface segmentations only: a canonical
  segmentation such as ``happiness<TAB>happy @@ness``, or a plain space,
  SIGMORPHON's word boundary, as in ``boardgamey<TAB>board game @@y``, is an
  error, which counts every such row of the file, unless the reader is asked to
  skip and count them: ``grind eval --segmentation --surface-only``).  A third
  TAB-separated column (the SIGMORPHON category) is allowed and ignored.

An *unparsed* word (``grind parse --segment`` found no derivation) is written
in both formats as the word, a TAB and ``_``: ``abdikovat<TAB>_``; it is read
back with ``morphs = None``.  Lines that start with ``# `` (hash and space) and
hold no TAB at the top of a file (before the first word: the header grind
writes) are skipped; ``#`` alone or ``#<TAB>#`` is the word ``#``.  An empty line, an
empty morph (two spaces in a row, a leading or trailing space, a bare
``@@``), morphs that do not concatenate to the word, or a segmented line in
the other format than the file's first segmented line (a SIGMORPHON line that
lost its segmentation column would otherwise read as a one-morph plain word)
are an :class:`~grind.errors.InputError` naming file and line.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from grind.errors import InputError
from grind.formats.textio import quote_line, read_lines

SEG_FORMATS = ("plain", "sigmorphon")
#: The segmentation column of an unparsed word.
UNPARSED = "_"


class NotSurface(InputError):
    """A SIGMORPHON row that is not a surface segmentation of one word: its morphs do not concatenate to
    the word (a canonical segmentation), or a morph after the first lacks its ``@@`` (a plain space is
    SIGMORPHON's word boundary: ``boardgamey<TAB>board game @@y``)."""


@dataclass(frozen=True)
class Segmentation:
    """One line: ``word``, its ``morphs`` (None: unparsed) and the 1-based ``line``."""

    word: str
    morphs: tuple[str, ...] | None
    line: int = 0

    def spans(self) -> tuple[tuple[int, int], ...] | None:
        """The morphs' character spans ``(start, end)`` (None when unparsed)."""
        return None if self.morphs is None else spans_of(self.morphs)


def spans_of(morphs) -> tuple[tuple[int, int], ...]:
    """``[(start, end), ...]`` of consecutive morphs: ``an an a`` -> (0,2) (2,4) (4,5)."""
    out, i = [], 0
    for m in morphs:
        out.append((i, i + len(m)))
        i += len(m)
    return tuple(out)


def morphs_from_cuts(tokens, cuts) -> tuple[str, ...]:
    """The morphs of a word given as ``tokens`` (characters, or longer units
    joined without spaces) cut at token positions ``cuts`` (0 < cut < len)."""
    pos = [0, *sorted(c for c in set(cuts) if 0 < c < len(tokens)), len(tokens)]
    return tuple("".join(tokens[a:b]) for a, b in zip(pos, pos[1:]))


def format_segmentation(word: str, morphs, fmt: str = "plain") -> str:
    """One line (with its newline) of a segmentation file; ``morphs=None`` = unparsed."""
    if morphs is None:
        return f"{word}\t{UNPARSED}\n"
    if fmt == "plain":
        return " ".join(morphs) + "\n"
    if fmt == "sigmorphon":
        return word + "\t" + " @@".join(morphs) + "\n"
    raise ValueError(fmt)


def read_segmentations(path: str, skipped: list | None = None,
                       canonical: list | None = None) -> list[Segmentation]:
    """Every segmented word of ``path`` in file order (see the module doc).  A SIGMORPHON row whose word
    has whitespace in it (a multi-word entry such as ``mouth harpist``, which ``--chars`` readers skip)
    is skipped and its line appended to ``skipped`` when that is given, else an InputError.  A row that is
    not a surface segmentation of one word (:class:`NotSurface`) is skipped and ``(line, word)`` appended
    to ``canonical`` when that is given, else an InputError counting every such row."""
    name = "<stdin>" if path == "-" else path
    out, header, first = [], True, None      # first: (line, format) of the first segmented word
    not_surface: list[tuple[int, NotSurface]] = []
    for lineno, raw in read_lines(path):
        line = raw.rstrip("\r\n")
        if header and line.startswith("# ") and "\t" not in line:     # '#' alone or '#<TAB>#' is a word
            continue
        header = False
        where = f"{name}:{lineno}"
        if not line.strip():
            raise InputError(f"{where}: empty line (one segmented word a line)")
        word = line.split("\t")[0]
        if "\t" in line and any(c.isspace() for c in word) and word.strip():
            if skipped is None:
                raise InputError(f"{where}: the word {word!r} has whitespace in it (a multi-word entry; a word "
                                 "must be one token)")
            skipped.append(lineno)
            continue
        try:
            seg = parse_line(line, where, lineno)
        except NotSurface as e:
            if canonical is None:
                not_surface.append((lineno, e))
            else:
                canonical.append((lineno, unicodedata.normalize("NFC", word)))
            continue
        if seg.morphs is not None:
            fmt = "sigmorphon" if "\t" in line else "plain"
            if first is None:
                first = (lineno, fmt)
            elif fmt != first[1]:
                raise InputError(f"{where}: a {fmt} line in a file whose line {first[0]} is {first[1]} "
                                 f"(a missing or extra TAB-separated column?): {quote_line(line)}")
        out.append(seg)
    if not_surface:
        n_rows = len(out) + len(not_surface)
        raise InputError(f"{not_surface[0][1]}; {len(not_surface)} of the {n_rows} segmented rows of {name} are "
                         "not surface segmentations of one word (morphs that do not concatenate to it, or a space "
                         "without '@@'): grind eval --segmentation --surface-only scores the others")
    if not out:
        raise InputError(f"{name}: no segmented words")
    return out


def parse_line(line: str, where: str, lineno: int = 0) -> Segmentation:
    """One line of a segmentation file (``where`` = ``file:line`` for errors), NFC-normalised as
    ``--chars`` normalises words (so an NFD gold file scores against grind's NFC output)."""
    line = unicodedata.normalize("NFC", line)
    if "\t" not in line:
        morphs = tuple(line.split(" "))
        if "" in morphs:
            raise InputError(f"{where}: an empty morph (morphs are separated by single spaces) in "
                             f"{quote_line(line)}")
        return Segmentation("".join(morphs), morphs, lineno)
    cols = line.split("\t")
    if len(cols) > 3:
        raise InputError(f"{where}: {len(cols)} TAB-separated columns; expected word<TAB>segmentation "
                         f"(and optionally a category): {quote_line(line)}")
    word, seg = cols[0], cols[1]
    if not word or word != word.strip():
        raise InputError(f"{where}: an empty word or one with surrounding spaces in {quote_line(line)}")
    if seg == UNPARSED and word != UNPARSED:
        return Segmentation(word, None, lineno)
    pieces = seg.split(" ")
    for k, p in enumerate(pieces[1:], 2):
        if not p.startswith("@@"):
            raise NotSurface(f"{where}: morph {k} {p!r} does not start with '@@' (SIGMORPHON format: "
                             f"'ab @@dik @@ova @@t'; a plain space is a word boundary): {quote_line(line)}")
    morphs = (pieces[0], *(p[2:] for p in pieces[1:]))
    if "" in morphs:
        raise InputError(f"{where}: an empty morph in {quote_line(line)}")
    if "".join(morphs) != word:
        raise NotSurface(f"{where}: the morphs {' + '.join(morphs)} = {''.join(morphs)!r} do not concatenate "
                         f"to the word {word!r} (only surface segmentations can be scored)")
    return Segmentation(word, morphs, lineno)
