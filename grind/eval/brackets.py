"""Unlabeled bracket evaluation (the convention of Kim et al. 2019).

Spans are compared as *sets* of (start, end) pairs (unary chains collapse);
width-1 spans and the whole-sentence span are not counted; sentences of
length 1 are skipped.  Reported: corpus-level P/R/F1 from pooled counts, the
sentence-level mean F1 (a sentence with no gold span has recall 1, and with
no predicted span either precision 1), and exact match (equal span sets).
A NOPARSE line (no tree) gets no credit: sentence F1 0, not an exact match,
its gold spans in the recall denominator.  A LEFTOUT line (a sentence the
parse's corpus options left out) is not scored: the gold trees are filtered
by the same options, so the two line up once LEFTOUT lines are set aside.  A corpus-level precision (recall)
with no predicted (gold) span at all is undefined: nan, never 1.
Traces (-NONE-) are removed from gold trees, and punctuation if asked, before
spans are read; the gold trees are filtered by length like the parsed corpus.
"""
from __future__ import annotations

from grind.eval.number import NEAR, frac, near
from grind.formats.corpus import PTB_PUNCT, PTB_PUNCT_PLUS
from grind.errors import InputError
from grind.formats.trees import (LEFTOUT, NOPARSE, TRACE_TAGS, leaves, map_leaves, prune, read_trees, spans,
                                 tags_as_leaves)
from grind.formats.textio import one_line

CONVENTION = ("unlabeled spans as sets; width-1 spans and the whole-sentence span not counted; "
              "sentences of length 1 skipped (Kim et al. 2019); a NOPARSE line gets no credit (sentence F1 0, "
              "also where the gold tree has no span to find; its gold spans stay in the recall denominator)")


def span_set(tree) -> set[tuple[int, int]]:
    n = len(leaves(tree))
    return {(i, j) for _, i, j in spans(tree) if j - i > 1 and (i, j) != (0, n)}


def _prf(match, n_pred, n_gold):
    p = match / n_pred if n_pred else 1.0
    r = match / n_gold if n_gold else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


#: The trivial baselines: binary trees over the gold words, branching to one side.
BASELINES = ("right-branching", "left-branching")


def baseline_spans(n: int, kind: str) -> set[tuple[int, int]]:
    """The counted spans (:func:`span_set`) of the right-branching (w1 (w2 (... wn))) or
    left-branching (((w1 w2) ...) wn) binary tree over n words."""
    if kind == "right-branching":
        return {(i, n) for i in range(1, n - 1)}
    return {(0, j) for j in range(2, n)}


def evaluate(gold_trees, pred_trees, lines=None, baselines: bool = False) -> dict:
    """Unlabeled bracket scores (see the module docstring); ``lines``: (gold, predicted) line numbers
    of the trees, named in errors; ``baselines``: also ``overlap_right-branching`` /
    ``overlap_left-branching``, the predicted spans that are the baseline tree's, divided by the
    predicted spans."""
    if len(gold_trees) != len(pred_trees):
        raise InputError(f"{len(gold_trees)} gold trees but {len(pred_trees)} predicted trees")
    items = []
    for k, (g, p) in enumerate(zip(gold_trees, pred_trees), 1):
        if leaves(g) != leaves(p):
            raise InputError(f"tree {k}{tree_lines(lines, k)}: gold and predicted yields differ: "
                             f"{' '.join(leaves(g))!r} vs {' '.join(leaves(p))!r}")
        n = len(leaves(g))
        items.append((n, span_set(g) if n >= 2 else set(), None if p[0] == NOPARSE else span_set(p)))
    res = score_spans(items)
    if baselines:
        for b in BASELINES:
            same = sum(len(ps & baseline_spans(n, b)) for n, _, ps in items if n >= 2 and ps is not None)
            total = sum(len(ps) for n, _, ps in items if n >= 2 and ps is not None)
            res[f"overlap_{b}"] = same / total if total else float("nan")
    return res


def baseline_scores(gold_trees) -> dict:
    """``{kind: scores}`` of each baseline tree over the gold trees' words, scored as :func:`evaluate` scores."""
    return {b: score_spans([(n, span_set(g) if n >= 2 else set(), baseline_spans(n, b))
                            for g in gold_trees for n in [len(leaves(g))]]) for b in BASELINES}


def score_spans(items) -> dict:
    """The scores of (words, gold spans, predicted spans or None for NOPARSE) per sentence."""
    match = n_pred = n_gold = exact = scored = noparse = 0
    f1s = []
    for n, gs, ps in items:
        if n < 2:
            noparse += ps is None
            continue
        if ps is None:                # no tree: no credit, not even for a sentence with no span to find
            noparse, n_gold, scored = noparse + 1, n_gold + len(gs), scored + 1
            f1s.append(0.0)
            continue
        m = len(gs & ps)
        match, n_pred, n_gold = match + m, n_pred + len(ps), n_gold + len(gs)
        f1s.append(_prf(m, len(ps), len(gs))[2])
        exact += gs == ps
        scored += 1
    p, r, f = _prf(match, n_pred, n_gold)
    if not n_pred:                      # corpus level: P (R) with no predicted (gold) span is undefined
        p = f = float("nan")
    if not n_gold:
        r = f = float("nan")
    return {"sentences": len(items), "scored": scored, "noparse": noparse,
            "precision": p, "recall": r, "f1": f,
            "sentence_f1": sum(f1s) / len(f1s) if f1s else 0.0,
            "exact": exact / scored if scored else 0.0}


def tree_lines(lines, k: int, j: int | None = None) -> str:
    """`` (gold line X, predicted line Y)`` of gold tree k and predicted tree j (1-based; default k),
    or '' without ``lines`` (the (gold, predicted) lists of the trees' line numbers)."""
    if not lines:
        return ""
    got = [(w, ls[i - 1]) for w, ls, i in zip(("gold", "predicted"), lines, (k, k if j is None else j))
           if ls and i - 1 < len(ls)]
    return f" ({', '.join(f'{w} line {n}' for w, n in got)})" if got else ""


def prepare_gold(trees, spec, lines=None):
    """Gold trees as the parsed corpus saw them: traces and punctuation (spec.punct)
    pruned, leaves from spec.column (FORM words, LFORM lower-cased, XPOS tags),
    length filter applied.  ``lines`` (the trees' line numbers): the kept trees' are
    left in it, in place."""
    tags = {"none": set(), "ud": {"PUNCT"}, "ptb": PTB_PUNCT, "ptb+": PTB_PUNCT_PLUS}[spec.punct]
    drop = TRACE_TAGS | set(tags)
    out, kept = [], []
    for i, t in enumerate(trees):
        t = prune(t, drop.__contains__)
        if t is None:
            continue
        if spec.column == "XPOS":
            t = tags_as_leaves(t)
        elif spec.column == "LFORM":
            t = map_leaves(t, str.lower)
        elif spec.column == "UPOS":
            raise InputError("bracketed gold trees have no UPOS; use --column XPOS, FORM or LFORM")
        n = len(leaves(t))
        if spec.min_length <= n and (spec.max_length is None or n <= spec.max_length):
            out.append(t)
            kept.append(i)
    if lines is not None:
        lines[:] = [lines[i] for i in kept]
    return out


def read_gold(gold_path, spec) -> tuple[list, list]:
    """(GOLD's trees as the parsed corpus saw them (:func:`prepare_gold`), their line numbers)."""
    gold_lines: list = []
    raw = read_trees(gold_path, gold_lines)
    if not raw:
        raise InputError(f"{'<stdin>' if gold_path == '-' else gold_path}: no trees in GOLD: nothing to score")
    return prepare_gold(raw, spec, gold_lines), gold_lines


def evaluate_files(gold_path, pred_path, spec, name: bool = False, read_as=None, gold=None,
                   base=None) -> tuple[str, dict]:
    """The report block of PRED against GOLD (with ``name``, a ``# predicted:`` line
    first, for reports of several files) and its scores; ``read_as``: the format
    ``--format auto`` detected for GOLD, for the header; ``gold``: :func:`read_gold`'s
    (read here if None); ``base``: :func:`baseline_scores`' (the block then adds the
    overlaps with the baseline trees and a ``# note:`` for a corpus F1 near a baseline's)."""
    gold, gold_lines = gold if gold is not None else read_gold(gold_path, spec)
    pred_lines: list = []
    try:
        pred = read_trees(pred_path, pred_lines)
        kept = [k for k, t in enumerate(pred) if t[0] != LEFTOUT]
        if len(kept) < len(pred):
            if len(kept) != len(gold):
                raise InputError(f"{len(pred) - len(kept)} predicted trees are marked LEFTOUT (the parse's corpus "
                                 f"options left them out) and {len(kept)} are not, against {len(gold)} gold trees: "
                                 "give grind eval the corpus options the prediction was made with (its '# corpus:' "
                                 "header)")
            pred, pred_lines[:] = [pred[k] for k in kept], [pred_lines[k] for k in kept]
        res = evaluate(gold, pred, (gold_lines, pred_lines), baselines=base is not None)
    except InputError as e:                  # name both files: there may be several PREDICTED files
        names = ["<stdin>" if p == "-" else p for p in (gold_path, pred_path)]
        raise InputError(f"{names[0]} vs {names[1]}: {e}") from None
    if res["precision"] != res["precision"]:
        from grind import log
        log.warn(f"{pred_path}: no predicted bracket to score ({res['noparse']} of {res['sentences']} trees NOPARSE): "
                 "precision and F1 are undefined, written nan; recall counts every gold bracket as missed")
    named = f"# predicted: {one_line('<stdin>' if pred_path == '-' else pred_path)}\n" if name else ""
    text = (f"{named}# convention: {CONVENTION}; gold traces (-NONE-) removed; gold read as {spec.describe(read_as)}\n"
            f"sentences\t{res['sentences']}\n"
            f"scored\t{res['scored']}\n"
            f"noparse\t{res['noparse']}\n"
            f"corpus_precision\t{frac(res['precision'])}\n"
            f"corpus_recall\t{frac(res['recall'])}\n"
            f"corpus_f1\t{frac(res['f1'])}\n"
            f"sentence_mean_f1\t{frac(res['sentence_f1'])}\n"
            f"exact_match\t{frac(res['exact'])}\n")
    if base is not None:
        text += "".join(f"overlap_{b}\t{frac(res[f'overlap_{b}'])}\n" for b in BASELINES)
        text += "".join(f"# note: corpus_f1 {frac(res['f1'])} is within {100 * NEAR:g} point of {b} "
                        f"{frac(base[b]['f1'])}\n" for b in BASELINES
                        if near(res["f1"], base[b]["f1"]))
    return text, res


def format_baselines(base) -> str:
    """The baseline block of a bracket report (:func:`baseline_scores`): ``KIND:KEY<TAB>value`` lines."""
    out = [f"# baselines: {' / '.join(BASELINES)} binary trees over GOLD's words, scored the same way (lines "
           "KIND:KEY); overlap_KIND of a prediction: its spans that are the KIND tree's, divided by its spans; a "
           f"note line where a corpus F1 is within {100 * NEAR:g} point ({NEAR}) of a baseline's\n"]
    for b in BASELINES:
        r = base[b]
        out += [f"{b}:{key}\t{frac(r[k])}\n" for key, k in (("corpus_precision", "precision"),
                                                          ("corpus_recall", "recall"), ("corpus_f1", "f1"),
                                                          ("sentence_mean_f1", "sentence_f1"),
                                                          ("exact_match", "exact"))]
    return "".join(out)


def format_spread(results) -> str:
    """Mean and sample standard deviation of several predicted files' scores."""
    import numpy as np
    out = [f"# {len(results)} predicted files: mean and sample standard deviation\n", "measure\tmean\tsd\n"]
    for key, label in (("precision", "corpus_precision"), ("recall", "corpus_recall"), ("f1", "corpus_f1"),
                       ("sentence_f1", "sentence_mean_f1"), ("exact", "exact_match")):
        x = np.array([r[key] for r in results], dtype=np.float64)
        out.append(f"{label}\t{frac(x.mean())}\t{frac(x.std(ddof=1))}\n")
    return "".join(out)
