"""Labeled bracket evaluation with EVALB's standard parameters (COLLINS.prm).

Definitions, applied in the same way to gold and predicted trees (nested
tuples ``(label, child, ...)`` as :func:`grind.formats.trees.read_trees`
gives them, PTB's unlabelled outer bracket already stripped):

* **Labels** are compared by :func:`base_label`: cut at the first ``-`` or
  ``=`` that is not at position 0 (``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``);
  a label that starts and ends with ``-`` (``-NONE-``, ``-LRB-``, ``-RRB-``)
  is kept whole.  Then ``PRT`` counts as ``ADVP`` (EQ_LABEL ADVP PRT).  The
  same applies to the POS tags compared for tagging accuracy.
* **Traces**: ``-NONE-`` preterminals are deleted, with the constituents
  left empty, before anything is counted; they do not count for length.
  The yields left (all words, punctuation included) must be equal, else
  :class:`grind.errors.InputError` naming the 1-based tree number (and
  the trees' lines when the caller gives them).
* **Punctuation** (DELETE_LABEL ``,`` ``:`` `````` ``''`` ``.``): the words
  whose *gold* tag is one of these are deleted from both trees (with the
  constituents left empty) before spans are computed, so spans are word
  positions over the remaining words; a bracket whose label is one of these
  tags or ``-NONE-`` is not counted either.  The sentence length of the
  cutoff counts punctuation (DELETE_LABEL_FOR_LENGTH is only ``-NONE-``).
* **Root**: a top node labelled ``ROOT``, ``TOP`` or empty is not a bracket
  (repeatedly: ``(ROOT (TOP (S ...)))`` counts from S); its children's are.
* **Preterminals** (a node whose only child is a word) are not brackets;
  they give the POS tags.
* **Brackets** are a multiset of (label, start, end): a unary X over Y with
  the same span, both labelled X, counts twice.  matched = size of the
  multiset intersection of gold and predicted brackets.
* **NOPARSE**: a predicted tree labelled ``NOPARSE`` (``grind parse`` found
  no tree; its yield is the sentence) has no bracket and no tag: all gold
  brackets are missed, its words are tagged wrong, it is never an exact
  match, and it is counted in ``noparse``.
* **Blocks**: all sentences, and those of at most ``cutoff`` (CUTOFF_LEN,
  40) words (gold words without ``-NONE-``, punctuation included).

Per block: ``sentences``, ``noparse``, ``gold_brackets``,
``predicted_brackets``, ``matched_brackets``, ``labeled_precision`` =
100 matched / predicted, ``labeled_recall`` = 100 matched / gold,
``labeled_f1`` = 2PR / (P + R) (corpus-level, from the pooled counts),
``exact_match`` = 100 x share of sentences whose gold and predicted bracket
multisets are equal, ``words`` (punctuation excluded), ``correct_tags``,
``tagging_accuracy`` = 100 correct_tags / words.  A percentage whose
denominator is 0 is 0 (as EVALB prints it).

:func:`evaluate_labeled_files` writes a ``# convention: ...`` line, then
``key<TAB>value`` lines, ``all_KEY`` then ``le40_KEY`` (``le{cutoff}_``),
for KEY in :data:`REPORT_KEYS`; percentages with 2 decimals.
"""
from __future__ import annotations

from collections import Counter

from grind.errors import InputError
from grind.eval.brackets import tree_lines
from grind.formats.trees import NOPARSE, events, fold, leaves, prune, read_trees
from grind.formats.treebank import base_label

CONVENTION = ("labeled brackets, EVALB COLLINS.prm: function tags stripped, -NONE- deleted, "
              "punctuation , : `` '' . ignored, ADVP = PRT, root bracket and TOP brackets not counted, "
              "brackets as a multiset, corpus-level P/R/F1")

#: COLLINS.prm DELETE_LABEL: punctuation tags deleted before spans are computed.
PUNCT_TAGS = frozenset([",", ":", "``", "''", "."])
#: COLLINS.prm DELETE_LABEL_FOR_LENGTH.
TRACE_TAG = "-NONE-"
#: Labels of a top node that is not a bracket.
ROOT_LABELS = frozenset(["ROOT", "TOP", ""])
#: COLLINS.prm DELETE_LABEL TOP: a TOP bracket is not counted wherever it is.
DELETED = "TOP"
#: COLLINS.prm EQ_LABEL ADVP PRT.
EQUIVALENT = {"PRT": "ADVP"}

#: The keys of each block, in the order of the report.
REPORT_KEYS = ("sentences", "noparse", "gold_brackets", "predicted_brackets", "matched_brackets",
               "labeled_precision", "labeled_recall", "labeled_f1", "exact_match",
               "words", "correct_tags", "tagging_accuracy")
_PERCENT = frozenset(["labeled_precision", "labeled_recall", "labeled_f1", "exact_match", "tagging_accuracy"])


def _key(label: str) -> str:
    """The label as compared: base label, then ADVP = PRT."""
    b = base_label(label)
    return EQUIVALENT.get(b, b)


def _is_trace(tag: str) -> bool:
    return base_label(tag) == TRACE_TAG


def _is_pre(node) -> bool:
    return isinstance(node, tuple) and len(node) == 2 and isinstance(node[1], str)


def _tags(node) -> list:
    """The tag of each word of ``node`` (None for a word not under a preterminal)."""
    out, stack = [], [node]
    while stack:
        t = stack.pop()
        if isinstance(t, str) or _is_pre(t):
            out.append(None if isinstance(t, str) else t[0])
        else:
            stack.extend(reversed(t[1:]))
    return out


def _drop_words(node, drop: set, pos: list):
    """``node`` without the words at positions ``drop`` (``pos[0]`` is the
    next word's position) and without constituents left empty; None if empty."""
    def word(w):
        k = pos[0]
        pos[0] += 1
        return None if k in drop else w

    def kept(t, kids):
        kids = [k for k in kids if k is not None]
        return (t[0], *kids) if kids else None

    return fold(node, word, kept)


def _brackets(node, start: int, top: bool, out: list) -> int:
    """Append the brackets (label, start, end) of ``node`` to ``out``; return its width."""
    if isinstance(node, str) or _is_pre(node):
        return 1
    pos = start
    opened: list[tuple[int, bool]] = []       # (start, root) of the constituents around pos
    for kind, t in events(node):
        if kind == "word":
            pos += 1
        elif kind == "open":
            parent = opened[-1][1] if opened else top
            opened.append((pos, parent and base_label(t[0]) in ROOT_LABELS))
        else:
            s, root = opened.pop()
            label = _key(t[0])
            if not _is_pre(t) and not root and label not in PUNCT_TAGS and label != TRACE_TAG and label != DELETED:
                out.append((label, s, pos))
    return pos - start


def bracket_multiset(tree) -> Counter:
    """The counted brackets of a tree already stripped of -NONE- and punctuation."""
    out: list = []
    if tree is not None:
        _brackets(tree, 0, True, out)
    return Counter(out)


def _sentence(k: int, gold, pred, where: str = "") -> dict:
    """The counts of one sentence (tree number ``k``, 1-based; ``where`` its lines, for errors)."""
    g = prune(gold, _is_trace)
    noparse = isinstance(pred, tuple) and pred[0] == NOPARSE
    p = pred if noparse else prune(pred, _is_trace)
    gw = leaves(g) if g is not None else []
    pw = leaves(p) if p is not None else []
    if gw != pw:
        raise InputError(f"tree {k}{where}: gold and predicted yields differ: {' '.join(gw)!r} vs "
                         f"{' '.join(pw)!r}")
    gtags = _tags(g) if g is not None else []
    if None in gtags:
        raise InputError(f"gold tree {k}{where}: word {gw[gtags.index(None)]!r} is not under a preterminal "
                         "(a POS tag): gold trees must tag every word")
    punct = {i for i, t in enumerate(gtags) if t is not None and base_label(t) in PUNCT_TAGS}
    gb = bracket_multiset(_drop_words(g, punct, [0]) if g is not None else None)
    if noparse:
        pb: Counter = Counter()
        ptags: list = [None] * len(pw)
    else:
        pb = bracket_multiset(_drop_words(p, punct, [0]) if p is not None else None)
        ptags = _tags(p) if p is not None else []
    scored = [i for i in range(len(gw)) if i not in punct]
    correct = sum(ptags[i] is not None and gtags[i] is not None and _key(ptags[i]) == _key(gtags[i])
                  for i in scored)
    return {"length": len(gw), "noparse": int(noparse), "gold": sum(gb.values()), "pred": sum(pb.values()),
            "matched": sum((gb & pb).values()), "exact": int(not noparse and gb == pb),
            "words": len(scored), "correct": correct}


def _pct(num: int, den: int) -> float:
    return 100.0 * num / den if den else 0.0


def _block(rows: list) -> dict:
    def total(key):
        return sum(r[key] for r in rows)

    gold, pred, matched = total("gold"), total("pred"), total("matched")
    p, r = _pct(matched, pred), _pct(matched, gold)
    return {"sentences": len(rows), "noparse": total("noparse"), "gold_brackets": gold,
            "predicted_brackets": pred, "matched_brackets": matched,
            "labeled_precision": p, "labeled_recall": r, "labeled_f1": 2 * p * r / (p + r) if p + r else 0.0,
            "exact_match": _pct(total("exact"), len(rows)),
            "words": total("words"), "correct_tags": total("correct"),
            "tagging_accuracy": _pct(total("correct"), total("words"))}


def evaluate_labeled(gold_trees, pred_trees, cutoff: int = 40, lines=None) -> dict:
    """Scores of ``pred_trees`` against ``gold_trees``: ``{"all": block,
    f"<={cutoff}": block}``, each block a dict with the keys :data:`REPORT_KEYS`.
    ``lines``: (gold, predicted) line numbers of the trees, named in errors."""
    gold = [(k, t) for k, t in enumerate(gold_trees, 1) if _has_words(t)]
    pred = [(k, t) for k, t in enumerate(pred_trees, 1) if _has_words(t)]
    if len(gold) != len(pred):
        raise InputError(f"{len(gold_trees)} gold trees but {len(pred_trees)} predicted trees"
                         + (" (not counting trees without words)" if len(gold) < len(gold_trees) or
                            len(pred) < len(pred_trees) else ""))
    rows = [_sentence(k, g, p, tree_lines(lines, k, j)) for (k, g), (j, p) in zip(gold, pred)]
    return {"all": _block(rows), f"<={cutoff}": _block([r for r in rows if r["length"] <= cutoff]),
            "wordless": (len(gold_trees) - len(gold), len(pred_trees) - len(pred))}


def _has_words(tree) -> bool:
    """Whether ``tree`` keeps a word once its ``-NONE-`` elements are deleted (grind parse writes no tree for
    one that does not, as it has no sentence to parse)."""
    t = prune(tree, _is_trace)
    return t is not None and bool(leaves(t))


def format_report(res: dict, cutoff: int = 40) -> str:
    """The ``# convention:`` line and ``key<TAB>value`` lines of :func:`evaluate_labeled`'s result."""
    lines = [f"# convention: {CONVENTION}; length cutoff {cutoff} (words without -NONE-, punctuation included)"]
    gold_wl, pred_wl = res.get("wordless", (0, 0))
    if gold_wl or pred_wl:
        lines.append(f"# skipped: {gold_wl} gold and {pred_wl} predicted trees without words (only -NONE- "
                     "elements), not scored")
    for prefix, block in (("all", res["all"]), (f"le{cutoff}", res[f"<={cutoff}"])):
        for key in REPORT_KEYS:
            v = block[key]
            lines.append(f"{prefix}_{key}\t{v:.2f}" if key in _PERCENT else f"{prefix}_{key}\t{v}")
    return "\n".join(lines) + "\n"


def evaluate_labeled_files(gold_path: str, pred_path: str, cutoff: int = 40) -> str:
    """The report (see the module docstring) of the PTB trees of ``pred_path``
    against those of ``gold_path``."""
    return format_report(evaluate_labeled(read_trees(gold_path), read_trees(pred_path), cutoff), cutoff)
