"""Penn Treebank trees prepared for a treebank PCFG, as Petrov et al. (2006)
prepare them and Wang & Blunsom (2013, §4.3) follow.

:func:`clean` (gold and training trees):

1. function tags and indices stripped (``NP-SBJ-1`` -> ``NP``, ``NP=2`` ->
   ``NP``; ``-NONE-``, ``-LRB-``, ``-RRB-`` kept whole);
2. ``-NONE-`` preterminals deleted, and every constituent left empty;
3. unary chains of one label collapsed (``(NP (NP ...))`` -> ``(NP ...)``,
   which step 2 leaves behind): they would make unary cycles ``X@a --> X@b``;
4. the tree put under one root symbol :data:`ROOT` (an outer ``TOP`` wrapper, as some
   treebanks write it, is that root, as ``grind eval --labeled`` reads it).

:func:`binarise` (right-factored, Markovised; :func:`debinarise` is its
inverse): a node ``X`` with children ``c1 .. ck``, k > 2, becomes
``(X c1 (@X c2 (@X ... (@X c(k-1) ck))))``.  With horizontal Markovisation
``h`` the intermediate symbol covering ``ci .. ck`` is ``@X|c(i-h) .. c(i-1)``
(the h siblings already generated to its left); h = 0 (the default, the
X-bar style of Petrov et al. 2006) gives plain ``@X``; ``h=None`` keeps the
whole history.  No vertical (parent) annotation: the latent subtypes are
meant to learn it.

Unknown words (:func:`signature`): training words seen at most ``rare``
times (default 1) are replaced by signatures of their shape, and so is
every word at test time that the grammar does not know, so that unseen
words parse.  A signature is ``<UNK`` + the capitalisation class (``-CAPS``
all capitals, ``-INITC`` capitalised first word, ``-CAP`` capitalised
elsewhere, ``-LC`` has a lower-case letter) + ``-NUM`` (has a digit) +
``-DASH`` (has a hyphen) + the first matching suffix class of
:data:`SUFFIXES` (lower-cased words of at least 4 characters) + ``>``:
deterministic in the word and whether it is the first word.  When a test
signature was never seen in training, :func:`backoff_signatures` gives the
coarser ones to try (suffix dropped, then dash, then digit).
"""
from __future__ import annotations

from collections import Counter

from grind.errors import InputError
from grind.formats.trees import TRACE_TAGS, fold, leaves

#: The root symbol of every prepared tree (never split into subtypes).
ROOT = "ROOT"
#: Prefix of the intermediate symbols of binarisation.
BIN = "@"
#: Suffix classes of unknown-word signatures, tried in this order.
SUFFIXES = ("ing", "ion", "ity", "ers", "est", "ed", "er", "ly", "al", "ic", "ive", "ous", "ble", "s", "y")
#: The markers of a signature, as opposed to a word.
UNK_OPEN, UNK_CLOSE = "<UNK", ">"


def base_label(label: str) -> str:
    """The label without function tags and indices, as EVALB compares it:
    cut at the first ``-`` or ``=`` after position 0 (``NP-SBJ-1`` -> ``NP``,
    ``NP=2`` -> ``NP``); a label that starts and ends with ``-``
    (``-NONE-``, ``-LRB-``, ``-RRB-``) is kept whole."""
    if len(label) > 1 and label[0] == "-" and label[-1] == "-":
        return label
    for i in range(1, len(label)):
        if label[i] in "-=":
            return label[:i]
    return label


def _is_pre(t) -> bool:
    return len(t) == 2 and isinstance(t[1], str)


def clean(tree, where: str = "<trees>"):
    """The tree prepared as in the module docstring (steps 1-4), or None when
    nothing but empty elements is left.  A non-preterminal with a word among
    its children is an :class:`InputError` naming ``where``."""
    def node(t, kids):                   # (a fold: no recursion, whatever the tree's depth)
        if _is_pre(t):
            return None if t[0] in TRACE_TAGS else (base_label(t[0]), t[1])
        if any(isinstance(c, str) for c in t[1:]):
            raise InputError(f"{where}: constituent {t[0]!r} has words and constituents as children: "
                             f"{' '.join(leaves(t))[:80]!r}")
        kids = [k for k in kids if k is not None]
        if not kids:
            return None
        label = base_label(t[0]) if t[0] else ROOT
        while len(kids) == 1 and not _is_pre(kids[0]) and kids[0][0] == label:
            kids = list(kids[0][1:])
        return (label, *kids)

    def walk(t):
        return fold(t, lambda w: w, node)

    if isinstance(tree, str):
        raise InputError(f"{where}: a bare word {tree!r} is not a tree")
    if tree[0] == "TOP":                 # a TOP wrapper is the root, as for grind eval --labeled
        tree = ("", *tree[1:])
    t = walk(tree)
    if t is None:
        return None
    if t[0] != ROOT:
        t = (ROOT, t)
    return t


def binarise(tree, h: int | None = 0):
    """Right-factored binarisation with horizontal Markovisation ``h`` (module docstring)."""
    def node(t, kids):
        if _is_pre(t):
            return t
        label = t[0]
        if len(kids) <= 2:
            return (label, *kids)
        base = label[len(BIN):].split("|")[0] if label.startswith(BIN) else label
        rest = kids[-1]                      # the chain of intermediate nodes, built from its right end
        for i in range(len(kids) - 2, 0, -1):
            seen = [k[0] for k in kids[:i]]
            hist = seen if h is None else seen[len(seen) - h:] if h else []
            rest = (BIN + base + ("|" + "_".join(hist) if hist else ""), kids[i], rest)
        return (label, kids[0], rest)

    return fold(tree, lambda w: w, node)


def debinarise(tree):
    """Splice every intermediate ``@`` node into its parent (inverse of :func:`binarise`)."""
    def node(t, done):
        if _is_pre(t):
            return t
        kids = []
        for c in done:
            if not isinstance(c, str) and c[0].startswith(BIN) and not _is_pre(c):
                kids.extend(c[1:])
            else:
                kids.append(c)
        return (t[0], *kids)

    return fold(tree, lambda w: w, node)


def signature(word: str, first: bool) -> str:
    """The unknown-word signature of ``word`` (``first``: it is the sentence's first word)."""
    sig = UNK_OPEN
    has_lower = any(ch.islower() for ch in word)
    if word[:1].isupper():
        sig += "-CAPS" if not has_lower and sum(ch.isalpha() for ch in word) > 1 else \
            "-INITC" if first else "-CAP"
    elif has_lower:
        sig += "-LC"
    if any(ch.isdigit() for ch in word):
        sig += "-NUM"
    if "-" in word:
        sig += "-DASH"
    low = word.lower()
    if len(low) >= 4 and has_lower:
        for suf in SUFFIXES:
            if low.endswith(suf):
                sig += "-" + suf
                break
    return sig + UNK_CLOSE


def backoff_signatures(sig: str) -> list[str]:
    """``sig`` and its coarser forms, finest first: the suffix class, then
    ``-DASH``, then ``-NUM``, then the capitalisation class dropped: the last is
    ``<UNK>`` (on its own the class of tokens without letters, such as ``&``)."""
    parts = sig[len(UNK_OPEN):-len(UNK_CLOSE)].split("-")[1:]
    out = [sig]
    while parts:
        parts = parts[:-1]
        cand = UNK_OPEN + "".join("-" + p for p in parts) + UNK_CLOSE
        if cand not in out:
            out.append(cand)
    return out


def is_signature(token: str) -> bool:
    return token.startswith(UNK_OPEN) and token.endswith(UNK_CLOSE)


def word_counts(trees) -> Counter:
    return Counter(w for t in trees for w in leaves(t))


def map_words(tree, known, counter: Counter | None = None):
    """Every word not in ``known`` replaced by its signature (backed off to
    one in ``known`` when that is a set of grammar terminals holding
    signatures); ``counter`` counts ``replaced`` and ``backoff``."""
    pos = [0]

    def f(t):
        i = pos[0]
        pos[0] += 1
        if t in known:
            return t
        w = unknown_token(t, i == 0, known)
        if counter is not None:
            counter["replaced"] += 1
            counter["backoff"] += w != signature(t, i == 0)
        return w

    return fold(tree, f, lambda t, kids: (t[0], *kids))


def unknown_token(word: str, first: bool, known) -> str:
    """The signature of an unknown word, backed off until ``known`` has it
    (the finest signature when none is known)."""
    sig = signature(word, first)
    for cand in backoff_signatures(sig):
        if cand in known:
            return cand
    return sig


def prepare(trees, where: str = "<trees>", h: int | None = 0, known=None, rare: int = 1, kept: list | None = None,
            lines: list | None = None):
    """Cleaned, binarised trees with unknown words replaced: by :func:`map_words`
    against ``known`` (a grammar's terminals), or when ``known`` is None by the
    training rule (words seen at most ``rare`` times).  Returns
    ``(trees, known, counter)``; trees left empty by cleaning are dropped and
    counted as ``empty`` (``kept``: gets the indices of the trees kept appended; ``lines``: each
    tree's line number, for messages)."""
    counter: Counter = Counter()
    cleaned = []
    for k, t in enumerate(trees, 1):
        c = clean(t, f"{where}:{lines[k - 1]}" if lines else f"{where}: tree {k}")
        if c is None:
            counter["empty"] += 1
        else:
            cleaned.append(c)
            if kept is not None:
                kept.append(k - 1)
    if known is None:
        freq = word_counts(cleaned)
        known = {w for w, n in freq.items() if n > rare}
    out = [binarise(map_words(t, known, counter), h) for t in cleaned]
    return out, known, counter
