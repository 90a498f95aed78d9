"""Corpora: plain text (one sentence a line), CoNLL-U, CoNLL-X and Malt-TAB.

For treebanks the token column is an explicit choice (``FORM``, ``LFORM`` =
lower-cased FORM, ``UPOS``, ``XPOS``); WSJ work uses the fine PTB tag (XPOS),
UD work UPOS.  Punctuation removal happens before the length filter (the WSJ10
convention of Klein & Manning 2004).  CoNLL-U comment lines, multiword-token
ranges (``3-4``) and empty nodes (``5.1``) are skipped (but kept in
``Sentence.raw``, so ``grind parse`` writes them back); token IDs must run
1..n in order.

When punctuation is removed, a gold head that pointed at a removed token is
moved up to that token's own head (repeatedly), so the remaining tokens still
form a tree.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
import unicodedata
from dataclasses import dataclass, field

from grind import log
from grind.errors import InputError
from grind.formats.textio import header_keys, is_stream, quote_line, read_lines, shown

#: PTB punctuation tags (Klein & Manning 2004's WSJ10 convention; CoNLL-X eval.pl instead decides by the
#: word form, all punctuation characters, and so also drops `#`); `#` and `$` are added by ``--punct ptb+``
#: as some setups do.
PTB_PUNCT = frozenset(["``", "''", ",", ".", ":", "-LRB-", "-RRB-"])
PTB_PUNCT_PLUS = PTB_PUNCT | {"#", "$"}

COLUMNS = ("FORM", "LFORM", "UPOS", "XPOS")
#: The 17 universal POS tags of UD v2 (https://universaldependencies.org/u/pos/).
UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
             "PUNCT", "SCONJ", "SYM", "VERB", "X")
#: The tags UD v1 had that v2 renamed (v1's CONJ is v2's CCONJ): a v1 treebank's, not "not a UPOS tag".
UPOS_V1_ONLY = {"CONJ": "CCONJ"}
FORMATS = ("auto", "text", "conllu", "conllx", "malt", "ptb", "sigmorphon")
PUNCT_RULES = ("none", "ud", "ptb", "ptb+")


@dataclass
class Sentence:
    """One sentence: the tokens grind models, and what a treebank says of them.

    ``rows`` are the kept token rows (CoNLL columns, for writing parses back);
    ``heads`` the gold heads (1-based, 0 = root) after punctuation removal;
    ``number`` the sentence's 1-based position in the file, ``line`` its first line;
    ``raw`` (CoNLL-U/CoNLL-X) every non-comment line of the block as read, as
    column lists: all tokens with their original IDs, punctuation included,
    multiword-token ranges and empty nodes, so :func:`conll_block` writes the
    input back with only HEAD/DEPREL/DEPS filled.
    """

    tokens: list[str]
    number: int
    line: int
    heads: list[int] | None = None
    rows: list[list[str]] | None = None
    comments: list[str] = field(default_factory=list)
    raw: list[list[str]] | None = None
    #: The gold segmentation of a ``sigmorphon`` row (NFC morphs, in order), else None.
    gold_morphs: list[str] | None = None
    #: Read with ``keep_outside`` (:func:`read_corpus`): why the corpus options leave this sentence out
    #: (None: kept).
    outside: str | None = None
    #: A sentence grind wrote marked (:data:`UNPARSED_MARK`, :data:`LEFT_OUT_MARK`): "unparsed" or "left out"
    #: (its heads are filler, read as None), else None.
    mark: str | None = None

    def __len__(self):
        return len(self.tokens)


@dataclass
class CorpusSpec:
    """How to read a corpus file (the command-line corpus options)."""

    format: str = "auto"
    column: str | None = None
    punct: str = "none"
    max_length: int | None = None
    min_length: int = 1
    #: One word a line, split into (NFC) characters: see the module doc.
    chars: bool = False
    #: Keep the first occurrence of every distinct token sequence only.
    types: bool = False

    def __post_init__(self):
        for what, v, ok in (("format", self.format, FORMATS), ("punct", self.punct, tuple(PUNCT_RULES)),
                            ("column", self.column, (None, *COLUMNS))):
            if v not in ok:
                raise InputError(f"{what} {v!r} is not one of {', '.join(str(x) for x in ok)}")

    def limits(self) -> str:
        """The length limits as messages say them: ``1..10``, ``2..inf``."""
        return f"{self.min_length}..{self.max_length if self.max_length else 'inf'}"

    def describe(self, read_as: str | None = None) -> str:
        """The options as a header line; ``read_as``: the format ``--format auto`` read the file as
        (:attr:`Corpus.format`, :func:`peek_format`)."""
        col = self.column or "tokens"
        lim = f"{self.min_length}..{self.max_length if self.max_length else 'inf'}"
        fmt = self.format
        if fmt == "auto" and read_as:
            fmt = f"{read_as} (auto-detected)"
        out = f"format={fmt} column={col} punct-removed={self.punct} length={lim} (after punctuation removal)"
        if self.chars:
            out += " tokens=characters (NFC)"
        if self.types:
            out += " types (first occurrences)"
        return out


def read_options(corpus_line: str) -> str:
    """The options of a ``# corpus:`` header value (:meth:`CorpusSpec.describe`), a format that ``--format
    auto`` detected written as the same format given: what two readings of one corpus must agree on."""
    return corpus_line.replace(" (auto-detected)", "")


_CONLL_ID = re.compile(r"[0-9]+(-[0-9]+|\.[0-9]+)?")


def format_from_name(path: str) -> str | None:
    """The format a file's extension names (``.conllu``, ``.conllx``/``.conll``, ``.dp``, ``.mrg``,
    also compressed), else None."""
    for ext, fmt in ((".conllu", "conllu"), (".conllx", "conllx"), (".conll", "conllx"), (".dp", "malt"),
                     (".mrg", "ptb")):
        if _has_ext(path, ext):
            return fmt
    return None


def detect_format(path: str, first_line: str | None) -> str:
    """The format of ``path`` from its extension, else from its first content line:
    ``(`` = PTB; 10 tab-separated columns with an integer (or ``3-4``) ID =
    CoNLL; 3-4 tab-separated columns with an integer head = Malt-TAB; no tab =
    plain text.  A line with tabs that fits none of these is an InputError
    (pass ``--format``)."""
    by_name = format_from_name(path)
    if by_name:
        return by_name
    if first_line is not None:
        if first_line.lstrip().startswith("("):
            return "ptb"
        if re.match(r"\s*([-+.0-9eE]+\s+){0,2}\S+\s+-->(\s|$)", first_line):
            name = "<stdin>" if path == "-" else path
            raise InputError(f"{name}: this looks like a grammar file (its first line is a rule "
                             f"{quote_line(first_line)}), not a corpus: GRAMMAR and CORPUS swapped? (to read it as "
                             "text all the same: --format text)")
        cols = first_line.rstrip("\r\n").split("\t")
        if len(cols) == 10 and _CONLL_ID.fullmatch(cols[0]):
            return "conllu"
        if len(cols) in (3, 4) and re.fullmatch(r"[0-9]+", cols[2].strip()):
            return "malt"
        if len(cols) > 1:
            name = "<stdin>" if path == "-" else path
            raise InputError(f"{name}: cannot tell the format: the first line has {len(cols)} tab-separated "
                             "columns but is neither CoNLL (10 columns, integer ID) nor Malt-TAB (word, tag, "
                             "integer head): pass --format (text, conllu, conllx, malt or ptb; sigmorphon "
                             "with --chars)")
    return "text"


def read_corpus(path: str, spec: CorpusSpec | None = None, keep_outside: bool = False) -> Corpus:
    """All sentences of ``path`` that pass ``spec``'s filters (see module doc).

    The whole file is read (and decoded) before any sentence is built, so a
    bad byte anywhere is reported before a bad line further up; use
    :func:`iter_corpus` to read a large corpus one sentence at a time.
    ``keep_outside``: the sentences the filters leave out (length limits,
    --types repeats) are kept too, in order, each with its ``outside``
    reason (:meth:`Corpus.kept` gives the others), for a command that
    writes every input sentence back.
    """
    stats: dict = {}
    out = Corpus(_sentences(path, spec or CorpusSpec(), list(read_lines(path)), stats, keep_outside))
    return out.counted(stats)


class Corpus(list["Sentence"]):
    """The sentences :func:`read_corpus` kept; ``left_out`` = sentences its length limits dropped;
    ``format`` = the format the file was read as; ``wordless`` = PTB trees holding only ``-NONE-``;
    ``multiword`` = SIGMORPHON rows skipped for a word with whitespace in it; ``duplicates`` =
    sentences ``--types`` dropped as repeats; ``no_words`` = CoNLL blocks without a word row."""

    left_out: int = 0
    format: str = ""
    wordless: int = 0
    multiword: int = 0
    duplicates: int = 0
    no_words: int = 0

    #: Of ``left_out``: sentences that punctuation removal left without a token (said apart: no length
    #: limit is to blame).
    punct_only: int = 0
    #: The length limits the reading applied, as the messages and headers say them.
    limits: str = ""
    #: A corpus read with ``keep_outside``: every sentence (:meth:`kept` are those the filters keep).
    everything: list | None = None

    def counted(self, stats: dict) -> Corpus:
        """Take the counts of the reading's ``stats``; returns self."""
        self.left_out, self.format = stats["left_out"], stats["format"]
        for k in ("wordless", "multiword", "duplicates", "no_words", "punct_only"):
            setattr(self, k, stats.get(k, 0))
        self.limits = stats.get("limits", "")
        return self

    def kept(self) -> Corpus:
        """The sentences the corpus options keep, with this reading's counts; ``everything`` = all of them
        (a corpus read without ``keep_outside``: itself)."""
        if not any(s.outside for s in self):
            self.everything = list(self)
            return self
        out = Corpus(s for s in self if not s.outside)
        for k in ("left_out", "format", "wordless", "multiword", "duplicates", "no_words", "punct_only", "limits"):
            setattr(out, k, getattr(self, k))
        out.everything = list(self)
        return out


def left_out(sents, what: str = "not written") -> str | None:
    """The ``# left_out:`` header value for a corpus read by read_corpus (None when its length limits
    dropped nothing and it had no PTB tree without words), so that an output never silently holds fewer
    sentences than its input."""
    n, w = getattr(sents, "left_out", 0), getattr(sents, "wordless", 0)
    m, d, e = getattr(sents, "multiword", 0), getattr(sents, "duplicates", 0), getattr(sents, "no_words", 0)
    p, limits = getattr(sents, "punct_only", 0), getattr(sents, "limits", "")
    parts = ([f"{n - p} sentences outside the length limits{' ' + limits if limits else ''} ({what})"]
             if n - p else []) + \
        ([f"{p} sentences of punctuation only, no token left after its removal ({what})"] if p else []) + \
        ([f"{w} trees without words, only -NONE- elements ({what})"] if w else []) + \
        ([f"{e} CoNLL sentences without a word row, only empty nodes or multiword ranges ({what})"] if e else []) + \
        ([f"{m} SIGMORPHON rows of more than one word ({what})"] if m else []) + \
        ([f"{d} repeats dropped by --types"] if d else [])
    return "; ".join(parts) or None


def read_corpus_tokens(path: str, spec: CorpusSpec | None = None) -> Corpus:
    """The sentences of :func:`read_corpus` (the same errors in the same order:
    bad bytes anywhere first) holding only their tokens, number, line and
    gold morphs -- no rows, heads or comments -- read a sentence at a time,
    each distinct token one string object: for commands that write no corpus
    back (a shard of a Fisher-sized corpus: ~100 MB instead of ~1.7 GB).
    Standard input is read whole, as by :func:`read_corpus`."""
    spec = spec or CorpusSpec()
    stats: dict = {}
    if is_stream(path):
        whole = read_corpus(path, spec)
        sents = iter(whole)
        stats.update((k, getattr(whole, k)) for k in ("left_out", "format", "wordless", "multiword", "duplicates",
                                                       "no_words", "punct_only", "limits"))
    else:
        for _ in read_lines(path):
            pass
        sents = _sentences(path, spec, read_lines(path), stats)
    seen: dict[str, str] = {}
    out = Corpus(Sentence([seen.setdefault(t, t) for t in s.tokens], s.number, s.line, gold_morphs=s.gold_morphs)
                 for s in sents)
    return out.counted(stats)


def iter_corpus(path: str, spec: CorpusSpec | None = None, stats: dict | None = None):
    """The sentences of :func:`read_corpus`, one at a time, reading ``path`` lazily.

    Only the current sentence (CoNLL block, text line or PTB tree) and the
    comment lines before the first content line are held in memory.  Errors
    are those of :func:`read_corpus`, raised when the reader reaches them;
    ``InputError("... no sentences ...")`` comes at the end when none passed.
    At the end ``stats`` (if given) holds ``left_out`` and ``format`` as
    :class:`Corpus` has them.
    """
    return _sentences(path, spec or CorpusSpec(), read_lines(path), stats)


def _sentences(path, spec, lines, stats=None, keep_outside=False):
    """Generator behind read_corpus / iter_corpus over (lineno, line) pairs.  Sentences outside the
    length limits are left out, counted on stderr and in ``stats["left_out"]`` (those that punctuation
    removal emptied also in ``stats["punct_only"]``); ``keep_outside``: yielded too, with their
    ``outside`` reason, as are --types repeats."""
    name = "<stdin>" if path == "-" else path
    fmt, lines = _format(path, spec.format, lines, spec.chars)
    if spec.format == "auto" and fmt not in ("text", "sigmorphon") and not format_from_name(path):
        log.info(f"{name}: read as {fmt} (--format auto, from its first line; its name does not say)")
    if fmt == "sigmorphon" and not spec.chars:
        raise InputError(f"{name}: the sigmorphon format (word<TAB>segmentation) is read as characters: "
                         "pass --chars")
    if spec.chars and fmt not in ("text", "sigmorphon"):
        raise InputError(f"{name}: --chars reads one word a line (plain text) or a sigmorphon TSV, "
                         f"but this is {fmt}: pass --format text or --format sigmorphon")
    if spec.chars and (spec.column or spec.punct != "none"):
        raise InputError(f"{name}: --column / --punct are for treebanks, not for --chars word lists")
    if spec.chars:
        sents = _read_words(lines, name, fmt == "sigmorphon", stats)
    elif fmt == "text":
        if spec.column not in (None, "FORM"):
            raise InputError(f"{name}: --column {spec.column} needs a CoNLL or Malt-TAB file, "
                             "but this is plain text (one sentence a line; its tokens are the FORM column)")
        if spec.punct != "none":
            raise InputError(f"{name}: --punct {spec.punct} (punctuation removal) needs tags, but this is "
                             "plain text: use a CoNLL or Malt-TAB file, or leave out --punct")
        sents = _read_text(lines, name, tabs_ok=spec.format == "text")
    elif fmt == "ptb":
        sents = _read_ptb(lines, name, spec, stats)
    else:
        sents = _read_treebank(lines, name, fmt, spec, stats)
    kept, left_out, seen, repeats, punct_only = 0, 0, set(), 0, 0
    limits = spec.limits()
    for s in sents:
        if spec.types:
            key = tuple(s.tokens)
            if key in seen:
                repeats += 1
                if keep_outside:
                    s.outside = "a repeat (--types)"
                    yield s
                continue
            seen.add(key)
        if spec.min_length <= len(s) and (spec.max_length is None or len(s) <= spec.max_length):
            kept += 1
            yield s
        else:
            left_out += 1
            empty = not s.tokens and spec.punct != "none"
            punct_only += empty
            if keep_outside:
                s.outside = (f"punctuation only (no token left after --punct {spec.punct})" if empty else
                             f"{len(s)} tokens, outside the length limits {limits}")
                yield s
    if not kept:
        why = ""
        if left_out:
            why = f": {left_out} read, every one outside the length limits {limits} (after punctuation removal)"
            if punct_only == left_out:
                why = f": {left_out} read, every one punctuation only (no token left after --punct {spec.punct})"
        raise InputError(f"{name}: no sentences ({spec.describe()}){why}")
    if stats is not None:
        stats["left_out"], stats["format"], stats["punct_only"] = left_out, fmt, punct_only
        stats["limits"] = limits if spec.min_length > 1 or spec.max_length is not None else ""
        if spec.types:
            stats["duplicates"] = repeats
    if repeats:
        log.info(f"{name}: --types: {repeats} repeated {'words' if spec.chars else 'sentences'} dropped "
                 f"({len(seen)} distinct)")
    if left_out:
        parts = ([f"{left_out - punct_only} outside the length limits {limits} (after punctuation removal)"]
                 if left_out > punct_only else []) + \
            ([f"{punct_only} of punctuation only (no token left after --punct {spec.punct})"] if punct_only else [])
        log.info(f"{name}: {kept} sentences kept; left out: {', '.join(parts)}")


def _has_ext(path, ext):
    return any(path.endswith(ext + z) for z in ("", ".gz", ".xz", ".bz2"))


def _nfc_word(word, name, lineno, what="word"):
    """``word`` NFC-normalised; an empty word or one with whitespace is an InputError."""
    if not word:
        raise InputError(f"{name}:{lineno}: empty {what} (one word a line; a blank line is not a word)")
    if any(c.isspace() for c in word):
        raise InputError(f"{name}:{lineno}: {what} {quote_line(word)} has whitespace in it "
                         "(--chars reads one word a line: a word must be one token)")
    return unicodedata.normalize("NFC", word)


#: The comment line that marks a sentence grind wrote without a parse (UD's ``# key = value`` style, never
#: one of grind's ``# key: value`` header lines), followed by why: its HEAD column is filler (attach-right,
#: DEPREL ``_``), so that the file is valid CoNLL-U and keeps every input sentence; grind's readers read
#: such a sentence without heads (``Sentence.mark``), so ``grind eval`` scores its words 0.
UNPARSED_MARK = "# grind_unparsed = "
#: ... a sentence the corpus options left out (length limits, --types repeats), written with filler heads
#: so that the file keeps every input sentence; ``grind eval`` refuses to score one.
LEFT_OUT_MARK = "# grind_left_out = "
MARKS = {UNPARSED_MARK: "unparsed", LEFT_OUT_MARK: "left out"}
_HEADER_KEY = re.compile(r"# [^\s:]+: ")


def split_header(comments: list[str]) -> tuple[list[str], list[str]]:
    """``(grind's header lines, the sentence's own comment lines)`` of a file's first sentence: grind
    writes its header (``# grind VERSION`` and the ``# key: value`` lines after it) as comments of the
    first sentence, as CoNLL-U allows; they are the file's, not the sentence's."""
    if not comments or not comments[0].startswith("# grind "):
        return [], comments
    k = 1
    while k < len(comments) and _HEADER_KEY.match(comments[k]):
        k += 1
    return comments[:k], comments[k:]


def mark_of(comments: list[str]) -> str | None:
    """``"unparsed"`` or ``"left out"`` for a sentence grind marked so (:data:`UNPARSED_MARK`), else None."""
    for c in comments:
        for prefix, mark in MARKS.items():
            if c.startswith(prefix):
                return mark
    return None


#: The ``# key: value`` header lines of the files read last, by display name (``<stdin>`` for ``-``):
#: what a stream's header said, for checks that cannot read a stream a second time.
HEADERS_READ: dict[str, dict[str, str]] = {}


def _without_header(lines, name, what, hint="", tab_is_data=False, words=False):
    """``lines`` after their leading ``#`` lines (grind's outputs have such a header), which are
    skipped and counted on stderr once the header ends (their ``# key: value`` pairs kept in
    :data:`HEADERS_READ`); ``tab_is_data``: a line with a TAB is data (a sigmorphon row whose
    word starts with ``#``), never a header line; ``words`` (one word a line): only ``# `` (hash and
    space, which no word holds) starts a header line, so ``#hashtag`` is a word, as in segmentation files."""
    it, heads, first, grinds = iter(lines), 0, None, False
    seen: list[str] = []
    for item in it:
        text = item[1].rstrip("\r\n")
        header = text.startswith("# ") or (heads > 0 and text == "#") if words else text.startswith("#")
        if not header or (tab_is_data and "\t" in item[1]):
            first = item
            break
        line = item[1].rstrip("\r\n")
        seen.append(line)
        grinds = (line.startswith("# grind ") if heads == 0 else grinds and (line == "#" or line.startswith("# ")))
        heads += 1
    HEADERS_READ[name] = header_keys(seen)
    if heads and not grinds:       # a header grind wrote (e.g. a shard's: '# grind ...', '# key: value') goes unsaid
        # a warning when data follows (a '#hashtag' sentence read as a header is lost); else the error says it
        (log.warn if first is not None else log.info)(
            f"{name}: the first {heads} line(s) start with '#' and are read as a header, not as {what}{hint}")
    if first is not None:
        yield first
        yield from it


def _read_words(lines, name, sigmorphon, stats=None):
    """--chars: one word a line (or a sigmorphon row), each NFC character one token; the leading
    lines that start with ``#`` are a header, skipped and counted on stderr."""
    number, has_gold, skipped, first = 0, None, [], 0
    for lineno, line in _without_header(lines, name, "words", tab_is_data=sigmorphon, words=True):
        s = line.rstrip("\r\n")
        gold = None
        if sigmorphon:
            if not s.strip():
                _nfc_word(s.strip(), name, lineno)       # "empty word (... a blank line is not a word)"
            cols = s.split("\t")
            if has_gold is None:
                has_gold, first = len(cols) > 1, lineno
            if has_gold and len(cols) < 2:
                raise InputError(f"{name}:{lineno}: no segmentation column (word<TAB>morph @@morph ...), "
                                 f"which line {first} has")
            if not has_gold and len(cols) > 1:
                raise InputError(f"{name}:{lineno}: a segmentation column, which line {first} does not have "
                                 "(one of the two lost or gained a column)")
            s = cols[0]
            if any(c.isspace() for c in s) and s.strip():
                skipped.append(lineno)
                continue
            if has_gold:                 # kept as read: train/parse do not use it (grind eval checks it)
                gold = [unicodedata.normalize("NFC", m.strip()) for m in cols[1].split("@@")]
        word = _nfc_word(s, name, lineno)
        number += 1
        yield Sentence(list(word), number, lineno, gold_morphs=gold)
    if stats is not None:
        stats["multiword"] = len(skipped)
    if skipped:
        log.warn(f"{name}: skipped {len(skipped)} row(s) whose word has whitespace in it (a multi-word entry; "
                 f"a word must be one token), at line(s) "
                 f"{shown(skipped)}")


def _format(path, fmt, lines, chars=False):
    """``(format, lines)``: ``auto`` resolved from the first content line, which
    (with the blank and comment lines before it) is put back in front of ``lines``;
    with ``chars`` (one word a line) a ``.tsv`` file, or a first line of 2-3 TAB-separated
    columns, is a sigmorphon TSV."""
    if fmt != "auto":
        return fmt, lines
    if chars and _has_ext(path, ".tsv"):
        return "sigmorphon", lines
    it, head, first = iter(lines), [], None
    for lineno, ln in it:
        head.append((lineno, ln))
        if ln.strip() and not ln.startswith("#"):
            first = ln
            break
    if chars and first is not None and 2 <= len(first.rstrip("\r\n").split("\t")) <= 3 and not format_from_name(path):
        return "sigmorphon", itertools.chain(head, it)
    return detect_format(path, first), itertools.chain(head, it)


def _read_text(lines, name="the corpus", tabs_ok=True):
    """Plain text, one sentence a line; the leading lines that start with ``#`` are a header (grind's
    outputs have one), skipped and counted on stderr.  A blank line ends the header.  ``tabs_ok``
    False (the format was detected from a first line without TABs): a line with a TAB is an error --
    a treebank row or a TSV further down, which would otherwise be read as one sentence."""
    number = blank = 0
    for lineno, line in _without_header(lines, name, "sentences", " (to read a first sentence that starts with "
                                        "'#', put a blank line before it)"):
        if not tabs_ok and "\t" in line:
            raise InputError(f"{name}:{lineno}: a TAB in a file read as plain text (its first line has none): "
                             f"a treebank row or a TSV line? {quote_line(line)} -- pass --format text to read "
                             "TABs as spaces, or the file's --format")
        toks = line.split()
        if toks:
            number += 1
            yield Sentence(toks, number, lineno)
        elif number:
            blank += 1
    if blank:
        log.info(f"{name}: {blank} blank line(s) between sentences skipped: sentences are numbered over the "
                 "other lines (messages also give the file's line numbers)")


def _read_ptb(lines, name, spec, stats=None, warn=True):
    """Bracketed trees: FORM = word, XPOS = preterminal tag; -NONE- traces dropped, and a tree left
    without words skipped, counted on stderr (``warn``) and in ``stats["wordless"]``.  A word not under
    a preterminal is an InputError naming the line of its tree."""
    from grind.formats.trees import TRACE_TAGS, parse_trees, preterminals
    column = spec.column or _default_column_error(name)
    number, wordless, tally, kept_tags = 0, [], Counter(), set()
    for first, text in _ptb_groups(lines):
        starts: list[int] = []
        for tree in parse_trees(text, name, starts, first):
            number += 1
            line = first + text.count("\n", 0, starts[-1])
            tagged = [p for p in preterminals(tree, f"{name}:{line}") if p[0] not in TRACE_TAGS]
            rows = [[str(i), w, "_", "_", t, "_", "_", "_", "_", "_", line] for i, (t, w) in enumerate(tagged, 1)]
            if rows:
                _tally_punct(tally, kept_tags, rows, spec.punct)
                yield _make_sentence(rows, number, line, [], column, spec.punct, name)
            else:
                wordless.append(line)
    if warn:
        _check_punct(tally, kept_tags, spec.punct, name, "ptb")
    if stats is not None:
        stats["wordless"] = len(wordless)
    if wordless and warn:
        log.warn(f"{name}: skipped {len(wordless)} tree(s) without words (only -NONE- elements), at line(s) "
                 f"{shown(wordless)}")


def _ptb_groups(lines):
    """``(first line number, text)`` of each group of lines holding whole trees."""
    buf, depth, first = [], 0, None
    for lineno, ln in lines:
        if ln.startswith("#"):
            continue
        if first is None:
            first = lineno
        buf.append(ln)
        depth += ln.count("(") - ln.count(")")
        if depth <= 0:
            yield first, "".join(buf)
            buf, depth, first = [], 0, None
    if buf:
        yield first, "".join(buf)


def _blocks(lines, heads: list | None = None, orphans: bool = False):
    """Yield (first line number, comment lines, token lines) per blank-line-separated block;
    ``heads`` gets the comment lines of comment-only blocks before the first block with rows (a
    header grind wrote); ``orphans``: a comment-only block after it (``# newdoc id = ...`` on its
    own) is yielded too, with no token lines."""
    comments: list[str] = []
    rows: list[tuple[int, str]] = []
    start, seen = None, False
    for lineno, line in lines:
        s = line.rstrip("\r\n")
        if not s.strip():
            if rows:
                seen = True
                yield start, comments, rows
            elif heads is not None and not seen:
                heads.extend(comments)
            elif orphans and seen and comments:
                yield start, comments, rows
            comments, rows, start = [], [], None
            continue
        if start is None:
            start = lineno
        if s.startswith("#") and not rows:
            comments.append(s)
        else:
            rows.append((lineno, s))
    if rows:
        yield start, comments, rows


_WARNED_ROOTS: set = set()


def _read_treebank(lines, name, fmt, spec, stats=None):
    column = spec.column or _default_column_error(name)
    if column not in COLUMNS:
        raise InputError(f"--column must be one of {', '.join(COLUMNS)}")
    roots = []                       # sentences with several HEAD 0 word rows (first lines)
    punct_roots = []                 # ... with one, punctuation, whose removal left its dependents at HEAD 0
    tally: Counter = Counter()
    kept_tags: set = set()
    heads: list[str] = []
    HEADERS_READ[name] = {}
    no_words = []                    # blocks with rows but no word row (only empty nodes / multiword ranges)
    for number, (start, comments, rows) in enumerate(_blocks(lines, heads), 1):
        if number == 1:
            own, comments = split_header(comments) if not heads else ([], comments)
            HEADERS_READ[name] = header_keys(heads or own or comments)
        toks = [_parse_row(ln, s, name, fmt) for ln, s in rows]
        raw = None
        if fmt != "malt":
            _check_ids(toks, rows, name)
            raw = [t[:10] for t in toks]
        elif sum(t[6] == "0" for t in toks) > 1:
            roots.append(start)
        toks = [t for t in toks if "-" not in t[0] and "." not in t[0]] if fmt != "malt" else toks
        several = sum(t[6] == "0" for t in toks) > 1
        if fmt != "malt" and several:
            roots.append(start)
        if toks:
            _tally_punct(tally, kept_tags, toks, spec.punct)
            s = _make_sentence(toks, number, start, comments, column, spec.punct, name)
            s.raw = raw
            s.mark = mark_of(comments)
            if s.mark:                       # grind's filler heads, not a tree of the sentence
                s.heads = None
            if not several and s.heads is not None and sum(h == 0 for h in s.heads) > 1:
                punct_roots.append(start)
            yield s
        else:
            no_words.append(start)
    if stats is not None:
        stats["no_words"] = len(no_words)
    if no_words:
        log.warn(f"{name}: skipped {len(no_words)} sentence(s) without a word row (only empty nodes or multiword "
                 f"ranges), at line(s) {shown(no_words)}")
    _check_punct(tally, kept_tags, spec.punct, name, fmt)
    if roots and name not in _WARNED_ROOTS:   # (Malt-TAB has no IDs: sentences run together show as a second root)
        _WARNED_ROOTS.add(name)                 # once a file (split reads it several times)
        hint = ("is a blank line missing between sentences?" if fmt == "malt" else
                "UD has one; grind eval scores each as annotated")
        log.warn(f"{name}: {len(roots)} sentence(s) with more than one root (HEAD 0), at line(s) "
                 f"{shown(roots)}: {hint}")
    if punct_roots and (name, spec.punct) not in _WARNED_ROOTS:
        _WARNED_ROOTS.add((name, spec.punct))
        log.warn(f"{name}: {len(punct_roots)} sentence(s) whose root is punctuation, at line(s) {shown(punct_roots)}: "
                 f"--punct {spec.punct} removes it and its dependents take its head (HEAD 0), so they have more than "
                 "one root (grind eval scores each as such)")


def conll_trees(lines, name: str, fmt: str):
    """``(comment lines, rows, heads)`` per block of a CoNLL-U / CoNLL-X file
    given as ``(lineno, line)`` pairs: ``rows`` every row (multiword ranges and
    empty nodes included) as its 10 columns plus its line number, IDs checked;
    ``heads`` the HEAD column of the word rows as ints (None when it is ``_``
    on every word: no tree), checked to be a tree.  Errors name file:line."""
    for number, (_, comments, block) in enumerate(_blocks(lines), 1):
        if number == 1:
            comments = split_header(comments)[1]
        rows = [_parse_row(ln, s, name, fmt) for ln, s in block]
        _check_ids(rows, block, name)
        words = [r for r in rows if r[0].isascii() and r[0].isdigit()]
        yield comments, rows, (_gold_heads(words, name) if words else None)


def _check_ids(toks, rows, name):
    """CoNLL IDs: tokens 1..n in order; a range ``a-b`` right before token a
    (b >= a, b <= n); empty nodes ``k.m`` (skipped) anywhere.  Errors name file:line."""
    expected, last_range = 1, None
    for t, (lineno, _) in zip(toks, rows):
        i = t[0]
        if i.isascii() and i.isdigit():
            if int(i) != expected:
                raise InputError(f"{name}:{lineno}: token ID {i} where {expected} was expected "
                                 "(IDs must run 1, 2, ... n in order; is a blank line missing between sentences?)")
            expected += 1
            continue
        m = re.fullmatch(r"([0-9]+)-([0-9]+)", i)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if a != expected or b < a:
                raise InputError(f"{name}:{lineno}: multiword-token range {i} does not fit here "
                                 f"(the next token ID is {expected})")
            if last_range is None or b > last_range[0]:
                last_range = (b, lineno, i)
            continue
        if re.fullmatch(r"[0-9]+\.[0-9]+", i):
            continue
        raise InputError(f"{name}:{lineno}: ID {quote_line(i)} is not a token number, a multiword-token "
                         "range (3-4) or an empty node (5.1)")
    if last_range and last_range[0] > expected - 1:
        raise InputError(f"{name}:{last_range[1]}: multiword-token range {last_range[2]} goes past the "
                         f"sentence's last token ({expected - 1})")


def _default_column_error(name):
    raise InputError(f"{name}: a treebank needs an explicit --column (one of {', '.join(COLUMNS)})")


def _parse_row(lineno, s, name, fmt):
    """A row as a 10-column CoNLL list plus its line number (MWT ranges and empty
    nodes included; Malt-TAB rows get ID None)."""
    if fmt == "malt":
        cols = s.split("\t") if "\t" in s else s.split()
        if len(cols) not in (3, 4):
            raise InputError(f"{name}:{lineno}: Malt-TAB line needs 'word tag head [deprel]', "
                             f"got {quote_line(s)}")
        word, tag, head = cols[:3]
        rel = cols[3] if len(cols) == 4 else "_"
        return [None, word, "_", "_", tag, "_", head, rel, "_", "_", lineno]
    cols = s.split("\t")
    if len(cols) != 10:
        raise InputError(f"{name}:{lineno}: expected 10 tab-separated CoNLL columns, got {len(cols)}")
    return cols + [lineno]


def _make_sentence(toks, number, start, comments, column, punct, name) -> Sentence:
    if toks[0][0] is None:  # Malt-TAB: number the tokens
        for i, t in enumerate(toks, 1):
            t[0] = str(i)
    heads = _gold_heads(toks, name)
    keep = [not _is_punct(t, punct) for t in toks]
    new_id, kept = {}, 0
    for i, k in enumerate(keep, 1):
        if k:
            kept += 1
            new_id[i] = kept
    new_heads = None
    if heads is not None:
        new_heads = []
        for i, k in enumerate(keep, 1):
            if k:
                h = heads[i - 1]
                while h != 0 and not keep[h - 1]:
                    h = heads[h - 1]
                new_heads.append(0 if h == 0 else new_id[h])
    rows = [t[:10] for t, k in zip(toks, keep) if k]
    tokens = [_column(t, column, name) for t, k in zip(toks, keep) if k]
    return Sentence(tokens, number, start, new_heads, rows, comments)


def _gold_heads(toks, name):
    """The HEAD column as ints; ``None`` when it is ``_`` on every token (no
    tree: a raw corpus, or a sentence ``grind parse`` found no parse for);
    ``_`` on some tokens only is an error."""
    blank = [t[6] == "_" for t in toks]
    if all(blank):
        return None
    if any(blank):
        t = toks[blank.index(True)]
        raise InputError(f"{name}:{t[10]}: HEAD is '_' here but a number elsewhere in the sentence "
                         "(give every token a head, or none)")
    heads = []
    for t in toks:
        h = t[6]
        if not (h.isascii() and h.isdigit()):
            raise InputError(f"{name}:{t[10]}: HEAD {quote_line(h)} is not a number (digits 0-9)")
        v = int(h)
        if not 0 <= v <= len(toks):
            raise InputError(f"{name}:{t[10]}: HEAD {v} is outside the sentence (1..{len(toks)})")
        heads.append(v)
    _check_tree(heads, name, [t[10] for t in toks])
    return heads


def _check_tree(heads, name, lines):
    """Every token must reach the root (0) by following heads: no cycles (the error names a token on
    the cycle, by its line in ``lines``, and the cycle's tokens)."""
    n = len(heads)
    for i in range(1, n + 1):
        h, steps = heads[i - 1], 0
        while h != 0:
            h, steps = heads[h - 1], steps + 1
            if steps > n:                          # h is on the cycle now
                cycle, c = [h], heads[h - 1]
                while c != h:
                    cycle.append(c)
                    c = heads[c - 1]
                first = min(cycle)
                what = (f"token {first}'s HEAD is itself" if len(cycle) == 1 else
                        f"the heads of tokens {', '.join(map(str, sorted(cycle)))} form a cycle")
                raise InputError(f"{name}:{lines[first - 1]}: {what} (the HEAD column must make a tree); "
                                 "is a blank line missing between sentences?")


def _column(row, column, name):
    if column == "FORM":
        return row[1]
    if column == "LFORM":
        return row[1].lower()
    v = row[3] if column == "UPOS" else row[4]
    if v == "_":
        where = f"{name}:{row[10]}" if len(row) > 10 else name
        raise InputError(f"{where}: column {column} is empty ('_') on this token; choose another --column "
                         "(or fill the column)")
    return v


_WARNED_PUNCT: set = set()


def _tally_punct(tally: Counter, kept_tags: set, toks, punct: str) -> None:
    """Count, for :func:`_check_punct`, the tokens of one sentence that ``punct`` removes and the
    columns it reads."""
    if punct == "none":
        return
    for t in toks:
        gone = _is_punct(t, punct)
        tally.update(tokens=1, removed=gone, no_upos=t[3] in ("_", ""), no_xpos=t[4] in ("_", ""))
        if punct != "ud" and t[3] == "PUNCT" and not gone:
            tally.update(kept_punct=1)
            kept_tags.add(t[4])


def _check_punct(tally: Counter, kept_tags: set, punct: str, name: str, fmt: str) -> None:
    """A --punct rule that reads a column the file does not have removes nothing: an InputError; PUNCT
    tokens (UPOS) that a PTB rule keeps: a warning, once a file."""
    n = tally["tokens"]
    if punct == "none" or not n:
        return
    if punct == "ud" and tally["no_upos"] == n:
        why = "Malt-TAB has no UPOS column" if fmt == "malt" else ("PTB trees have no UPOS tags" if fmt == "ptb"
                                                                    else "its UPOS column is '_' everywhere")
        raise InputError(f"{name}: --punct ud removes the tokens whose UPOS is PUNCT, but {why}: use --punct ptb "
                         "(PTB punctuation tags in XPOS), or none")
    if punct != "ud" and tally["no_xpos"] == n and not tally["removed"]:
        raise InputError(f"{name}: --punct {punct} removes the tokens whose XPOS is a PTB punctuation tag, but its "
                         "XPOS column is '_' everywhere: use --punct ud (UPOS PUNCT)")
    if tally["kept_punct"] and (name, punct) not in _WARNED_PUNCT:
        _WARNED_PUNCT.add((name, punct))
        tags = ", ".join(sorted(kept_tags)[:8])
        log.warn(f"{name}: --punct {punct} kept {tally['kept_punct']} of the tokens whose UPOS is PUNCT (their XPOS "
                 f"{tags} is not a PTB punctuation tag): --punct ud removes them")


def _is_punct(row, punct):
    if punct == "none":
        return False
    if punct == "ud":
        return row[3] == "PUNCT"
    tags = PTB_PUNCT_PLUS if punct == "ptb+" else PTB_PUNCT
    return row[4] in tags or (row[4] == "_" and row[3] in tags)


def conll_block(sentence: Sentence, heads, fmt: str = "conllu", header=(), mark: str | None = None) -> str:
    """The sentence as a CoNLL block with HEAD set to ``heads`` (1-based, 0 = root).

    A CoNLL-U/CoNLL-X sentence (``sentence.raw``; ``fmt`` the format it was
    read as) is written back line for line with its original IDs,
    multiword-token ranges and empty nodes, see :func:`_conll_passthrough`.
    Other sentences (Malt-TAB, PTB, plain text):
    the kept rows with IDs renumbered 1..n.  DEPREL becomes ``root``/``dep``
    and DEPS ``_``.  ``heads=None`` (no parse, or a sentence the corpus
    options left out) writes filler heads, attach-right with DEPREL ``_``,
    after the comment ``mark`` (:data:`UNPARSED_MARK` or :data:`LEFT_OUT_MARK`
    and the reason; default: unparsed), which :func:`read_corpus` reads back
    as a sentence without heads.  ``header``: the file's header lines, written
    as the first comments of its first sentence (a comment-only block
    followed by a blank line would be a sentence without words, which
    CoNLL-U does not allow).  A plain-text sentence gets FORM = token and
    ``_`` elsewhere.
    """
    comments = [c + "\n" for c in sentence.comments if not mark_of([c])]
    if heads is None:
        comments.append(one_line_mark(mark or UNPARSED_MARK + "no parse") + "\n")
    top = "".join(header) + "".join(comments)
    if sentence.raw is not None and sentence.rows is not None:
        return top + _conll_passthrough(sentence, heads, fmt == "conllx")
    rows = sentence.rows or [[str(i), t] + ["_"] * 8 for i, t in enumerate(sentence.tokens, 1)]
    out = []
    for i, row in enumerate(rows, 1):
        r = list(row)
        if heads is None:
            r[0], r[6], r[7], r[8] = str(i), str(i + 1 if i < len(rows) else 0), "_", "_"
        else:
            h = heads[i - 1]
            r[0], r[6], r[7], r[8] = str(i), str(int(h)), "root" if h == 0 else "dep", "_"
        out.append("\t".join(r) + "\n")
    return top + "".join(out) + "\n"


def one_line_mark(text: str) -> str:
    """A mark comment on one line."""
    return text.replace("\r", " ").replace("\n", " ")


#: DEPREL of the tokens punctuation removal left out, in ``grind parse`` output.
REMOVED_DEPREL = "punct"


def _conll_passthrough(sentence: Sentence, heads, conllx: bool = False) -> str:
    """A CoNLL-U/CoNLL-X sentence's rows written back line for line (IDs,
    multiword-token ranges unchanged; empty nodes with DEPS ``_``).  Kept
    tokens get HEAD = the original ID of their head in ``heads`` and DEPREL
    ``root``/``dep``; tokens punctuation removal left out get HEAD = the root
    word's ID and DEPREL ``punct`` (not a prediction); DEPS (CoNLL-X: PHEAD and
    PDEPREL) becomes ``_`` on every token: no gold arc is written back.
    ``heads=None``: filler, every word attached to the next word (the last
    one the root), DEPREL and DEPS ``_``."""
    assert sentence.rows is not None and sentence.raw is not None     # checked by the caller
    ids = [r[0] for r in sentence.rows]
    pos = {x: k for k, x in enumerate(ids)}
    words = [r[0] for r in sentence.raw if r[0].isascii() and r[0].isdigit()]
    filler = {w: (words[k + 1] if k + 1 < len(words) else "0") for k, w in enumerate(words)}
    root = "0"
    if heads is not None:
        root = next((ids[k] for k, h in enumerate(heads) if int(h) == 0), "0")
    out = []
    for row in sentence.raw:
        r = list(row)
        if not (r[0].isascii() and r[0].isdigit()):
            if "." in r[0] and len(r) > 8:
                r[8] = "_"                              # an empty node's enhanced arcs are gold's
            out.append("\t".join(r) + "\n")            # multiword range or empty node: as read
            continue
        if conllx and len(r) > 9:
            r[9] = "_"                                  # PDEPREL (PHEAD is column 8, set below)
        k = pos.get(r[0])
        if heads is None:
            r[6], r[7], r[8] = filler[r[0]], "_", "_"
        elif k is None:
            r[6], r[7], r[8] = root, REMOVED_DEPREL, "_"
        else:
            h = int(heads[k])
            r[6], r[7], r[8] = ("0", "root", "_") if h == 0 else (ids[h - 1], "dep", "_")
        out.append("\t".join(r) + "\n")
    return "".join(out) + "\n"


def corpus_types(path: str, spec: CorpusSpec, stats: dict | None = None) -> set[str]:
    """Every token type of ``path`` read with ``spec``'s format, column and
    punctuation rule but *without* its length filter (``stats``: as :func:`iter_corpus` fills it)."""
    from dataclasses import replace
    return {t for s in iter_corpus(path, replace(spec, max_length=None, min_length=1), stats) for t in s.tokens}


def read_tags(path: str) -> list[str]:
    """Tags of a tag file: whitespace-separated (one a line or several), blank
    lines and comment lines (starting with ``# ``, hash and space) skipped, so
    the PTB tag ``#`` can be listed on its own.  InputError when none."""
    name = "<stdin>" if path == "-" else path
    tags = []
    for _, ln in read_lines(path):
        if ln.startswith("# "):
            continue
        tags += ln.split()
    if not tags:
        raise InputError(f"{name}: no tags (one a line or whitespace separated; '# ' starts a comment line)")
    return list(dict.fromkeys(tags))


@dataclass
class Block:
    """One unit of a corpus file as ``grind split`` moves it, kept whole: a
    text line, a word line (``--chars``), a CoNLL block (its comment lines,
    token rows, multiword ranges and empty nodes), or the lines holding
    whole PTB trees (with the ``#`` lines before them).

    ``lines`` are its lines as read (without line ends); ``sentences`` what
    :func:`read_corpus` makes of them under the spec's format, column and
    punctuation rule, *before* ``--types`` and the length filters (none for
    a block of only ``-NONE-`` trees, multiword ranges or skipped rows; PTB
    lines may hold several trees)."""

    lines: list[str]
    sentences: list[Sentence]


def corpus_blocks(path: str, spec: CorpusSpec, pairs=None) -> tuple[str, list[Block]]:
    """``(format, blocks)``: the whole of ``path`` (or its ``(lineno, line)``
    ``pairs`` when already read) as :class:`Block`s in file order, with the
    format resolved as :func:`read_corpus` resolves it.

    The file is first read with :func:`read_corpus`'s own reader, so it
    raises the errors that reader raises (``no sentences`` included).  What
    belongs to no sentence is not a block: a text file's leading ``#``
    header lines and blank lines, CoNLL comment lines not followed by token
    rows before the first sentence (a file header; such lines later, e.g. a
    ``# newdoc`` block on its own, are a block without sentences), blank
    lines and trailing ``#`` lines of a PTB file."""
    pairs = list(read_lines(path)) if pairs is None else pairs
    for _ in _sentences(path, spec, iter(pairs)):
        pass
    fmt = block_format(path, spec, pairs)
    return fmt, list(iter_blocks(path, spec, fmt, pairs))


def check_corpus(path: str, spec: CorpusSpec) -> str:
    """Read the file ``path`` (not stdin) as :func:`corpus_blocks` first reads
    it, raising the same errors in the same order (bad bytes anywhere, then
    the reader's), but a line and a sentence at a time; its block format."""
    for _ in read_lines(path):
        pass
    stats: dict = {}
    for _ in iter_corpus(path, spec, stats):
        pass
    return stats["format"]


def peek_format(path: str, spec: CorpusSpec) -> str | None:
    """The format :func:`read_corpus` reads ``path`` as, from its name and first content line
    (None for standard input or a pipe, which cannot be read twice)."""
    if is_stream(path):
        return None
    lines = read_lines(path)
    try:
        return block_format(path, spec, lines)
    finally:
        lines.close()


def block_format(path: str, spec: CorpusSpec, pairs) -> str:
    """The format :func:`read_corpus` reads ``path`` as (``pairs``: its
    ``(lineno, line)``, read up to the first content line)."""
    return _format(path, spec.format, iter(pairs), spec.chars)[0]


def iter_blocks(path: str, spec: CorpusSpec, fmt: str, pairs):
    """The :class:`Block`s of :func:`corpus_blocks`, one at a time, from the
    ``(lineno, line)`` ``pairs`` of a file already checked (and its ``fmt``)."""
    name = "<stdin>" if path == "-" else path
    if spec.chars:
        header = True
        for lineno, line in pairs:
            s = line.rstrip("\r\n")
            if header and s.startswith("#"):
                continue
            header = False
            word = s.split("\t")[0] if fmt == "sigmorphon" else s
            skipped = fmt == "sigmorphon" and any(c.isspace() for c in word) and word.strip()
            sents = [] if skipped else [Sentence(list(unicodedata.normalize("NFC", word)), 0, lineno)]
            yield Block([s], sents)
    elif fmt == "text":
        header = True
        for lineno, line in pairs:
            s = line.rstrip("\r\n")
            if header and s.startswith("#"):
                continue
            header = False
            if s.split():
                yield Block([s], [Sentence(s.split(), 0, lineno)])
    elif fmt == "ptb":
        comments: list[tuple[int, str]] = []
        group: list[tuple[int, str]] = []
        depth = 0
        for lineno, line in pairs:
            s = line.rstrip("\r\n")
            if s.startswith("#"):
                (group if group else comments).append((lineno, s))
                continue
            if not group and not s.strip():
                continue
            group.append((lineno, s))
            depth += s.count("(") - s.count(")")
            if depth <= 0:
                sents = list(_read_ptb([(n, t + "\n") for n, t in group], name, spec, warn=False))
                yield Block([t for _, t in comments + group], sents)
                comments, group, depth = [], [], 0
    else:
        for number, (start, comment_lines, rows) in enumerate(_blocks(iter(pairs), orphans=True), 1):
            if number == 1:                      # a header grind wrote is the file's, not the sentence's
                comment_lines = split_header(comment_lines)[1]
            if not rows:                         # comments on their own between sentences: kept, no sentence
                yield Block(comment_lines, [])
                continue
            lines = [(start, c + "\n") for c in comment_lines] + [(n, t + "\n") for n, t in rows]
            sents = list(_read_treebank(lines, name, fmt, spec))
            yield Block(comment_lines + [t for _, t in rows], sents)
