"""Hard structural constraints on DMV trees (Cohen & Smith 2009), as parser masks.

A *constraint* is a set Y_k of projective dependency trees of a sentence,
given by a mask function::

    mask(tokens, n) -> (allowed_arc, allowed_root)
    allowed_arc[h, d]  (bool, n x n, 0-based)  head h may take dependent d
    allowed_root[i]    (bool, n)               word i may attach to the wall

Y_k = the projective trees all of whose arcs and whose root are allowed.  A
masked parser (:func:`constrained_parser`) is a
:class:`~grind.kernels.dmv.DMVParser` given ``masks``: its static rule tables
hold -1 (an impossible arc / root) wherever the mask forbids, so the
unchanged kernel sums, maximises and samples over Y_k only::

    Z_k(theta) = sum_{y in Y_k} p(x, y | theta)
    viterbi    = argmax_{y in Y_k} p(x, y | theta),   sample ~ p(y | x, theta, y in Y_k)

A sentence with no tree in Y_k gets log Z_k = -inf (no counts, no tree);
:class:`grind.infer.mixture.MixtureParser`, which combines these parsers with the
unconstrained one behind the same contract, then uses q_0 for it.

The six components (0-based positions, n words; "head" of d = parent)::

    RA   RightAttach   every parent is right of its child: arc h -> d only if h > d
                       (so the last word is the root; any root is left allowed,
                       the arcs force it)
    AR   AllRight      the rightmost word heads everything: root = n-1, arcs
                       only n-1 -> d (exactly one tree)
    LC   LeftChain     a chain: the head of word i is word i+1 (i < n-1), the
                       last word is the root (exactly one tree; = RA with
                       adjacent arcs only)
    VAR  VerbAsRoot    only verbs attach to the wall: root i only if tokens[i]
                       is a verb (UPOS VERB/AUX, PTB VB*/MD); a sentence with
                       no verb allows every root
    NS   NounSequence  in each maximal run a..b (b > a) of nouns (UPOS
                       NOUN/PROPN, PTB NN*), the last noun heads the others:
                       the head of every i in a..b-1 is b (other arcs into
                       them and their root attachment are forbidden; what
                       they or b head is not constrained)
    SD   ShortDep      dependencies of length |h - d| <= 4 (``SD<k>``: <= k);
                       the root is not constrained

A spec ``"RA+VAR+SD"`` is the intersection of its parts (mask AND mask):
Y = Y_RA ∩ Y_VAR ∩ Y_SD.  :func:`parse_mixture_spec` reads a comma-separated
list of such intersections (the constrained components of a mixture).
"""
from __future__ import annotations

import re

import numpy as np

from grind.errors import InputError
from grind.kernels.dmv import DMVParser

__all__ = [
    "COMPONENTS",
    "all_right",
    "constrained_parser",
    "intersect",
    "is_noun",
    "is_verb",
    "left_chain",
    "noun_sequence",
    "parse_mixture_spec",
    "parse_spec",
    "right_attach",
    "satisfies",
    "short_dep",
    "verb_as_root",
]

VERB_UPOS = frozenset(["VERB", "AUX"])
NOUN_UPOS = frozenset(["NOUN", "PROPN"])


def is_verb(tag: str) -> bool:
    """UPOS VERB/AUX, PTB VB, VBD, VBG, VBN, VBP, VBZ (any VB*) and MD."""
    return tag in VERB_UPOS or tag.startswith("VB") or tag == "MD"


def is_noun(tag: str) -> bool:
    """UPOS NOUN/PROPN, PTB NN, NNS, NNP, NNPS (any NN*)."""
    return tag in NOUN_UPOS or tag.startswith("NN")


def _full(n):
    return np.ones((n, n), dtype=bool) & ~np.eye(n, dtype=bool), np.ones(n, dtype=bool)


def right_attach(tokens, n):
    """RA: arc h -> d only if h > d (every parent right of its child)."""
    h, d = np.indices((n, n))
    return h > d, np.ones(n, dtype=bool)


def all_right(tokens, n):
    """AR: root = last word, every other word's head is the last word."""
    arc = np.zeros((n, n), dtype=bool)
    arc[n - 1, :n - 1] = True
    root = np.zeros(n, dtype=bool)
    root[n - 1] = True
    return arc, root


def left_chain(tokens, n):
    """LC: head of word i is i+1; the last word is the root."""
    arc = np.zeros((n, n), dtype=bool)
    i = np.arange(n - 1)
    arc[i + 1, i] = True
    root = np.zeros(n, dtype=bool)
    root[n - 1] = True
    return arc, root


def verb_as_root(tokens, n):
    """VAR: root only on verbs; every root if the sentence has no verb."""
    arc, _ = _full(n)
    root = np.array([is_verb(t) for t in tokens], dtype=bool)
    if not root.any():
        root[:] = True
    return arc, root


def noun_sequence(tokens, n):
    """NS: in each maximal noun run a..b (b > a), head(i) = b for a <= i < b."""
    arc, root = _full(n)
    noun = [is_noun(t) for t in tokens]
    i = 0
    while i < n:
        if not noun[i]:
            i += 1
            continue
        b = i
        while b + 1 < n and noun[b + 1]:
            b += 1
        for j in range(i, b):
            arc[:, j] = False
            arc[b, j] = True
            root[j] = False
        i = b + 1
    return arc, root


def short_dep(k: int = 4):
    """SD: the mask allowing arcs of length |h - d| <= k."""
    def mask(tokens, n):
        h, d = np.indices((n, n))
        return (np.abs(h - d) <= k) & (h != d), np.ones(n, dtype=bool)
    mask.__name__ = f"short_dep_{k}"
    return mask


def intersect(*masks):
    """The mask of Y_1 ∩ ... ∩ Y_m (elementwise AND); all trees when empty."""
    def mask(tokens, n):
        arc, root = _full(n)
        for m in masks:
            a, r = m(tokens, n)
            arc = arc & a
            root = root & r
        return arc, root
    mask.__name__ = "+".join(getattr(m, "__name__", "?") for m in masks) or "all"
    return mask


COMPONENTS = {"RA": right_attach, "RIGHTATTACH": right_attach,
              "AR": all_right, "ALLRIGHT": all_right,
              "LC": left_chain, "LEFTCHAIN": left_chain,
              "VAR": verb_as_root, "VERBASROOT": verb_as_root,
              "NS": noun_sequence, "NOUNSEQUENCE": noun_sequence}


def parse_spec(spec: str):
    """``"RA+VAR+SD"`` -> the intersection mask.  Names (case-insensitive):
    RA/RightAttach, AR/AllRight, LC/LeftChain, VAR/VerbAsRoot,
    NS/NounSequence, SD/ShortDep (``SD3``, ``ShortDep6``: other length bounds)."""
    parts = [p.strip() for p in str(spec).split("+")]
    if not parts or any(not p for p in parts):
        raise InputError(f"bad constraint spec {spec!r}")
    masks = []
    for p in parts:
        u = p.upper()
        m = re.fullmatch(r"(SD|SHORTDEP)(\d*)", u)
        if m:
            masks.append(short_dep(int(m.group(2)) if m.group(2) else 4))
        elif u in COMPONENTS:
            masks.append(COMPONENTS[u])
        else:
            raise InputError(f"unknown constraint {p!r} in {spec!r} "
                             "(RA, AR, LC, VAR, NS, SD[k], joined by +)")
    out = masks[0] if len(masks) == 1 else intersect(*masks)
    out.spec = "+".join(parts) if len(masks) > 1 else parts[0]
    return out


def parse_mixture_spec(spec: str):
    """``"RA+VAR+SD,LC"`` -> [(name, mask), ...]: one constrained component
    per comma-separated intersection."""
    return [(s.strip(), parse_spec(s)) for s in str(spec).split(",")]


def satisfies(mask, tokens, heads) -> bool:
    """Whether the tree ``heads`` (1-based, 0 = root) lies in the mask's Y_k."""
    n = len(heads)
    arc, root = mask(tokens, n)
    for d, h in enumerate(heads):
        h = int(h)
        if h == 0 and not root[d]:
            return False
        if h > 0 and not arc[h - 1, d]:
            return False
    return True


def constrained_parser(grammar, sentences, masks) -> DMVParser:
    """A DMV parser for ``sentences`` restricted to the trees ``masks`` allow
    (a mask function, a spec string like ``"RA+VAR+SD"``, or one mask per
    sentence); see the ``masks`` argument of :class:`~grind.kernels.dmv.DMVParser`."""
    if isinstance(masks, str):
        masks = parse_spec(masks)
    return DMVParser(grammar, sentences, masks=masks)
