"""Morphological segmentation evaluation, the one-morph / every-character
baselines and the overlap with them.

Measures (all over word TYPES: a word listed several times counts once, and
pooled over the word types, i.e. micro-averaged):

* morph_P / morph_R / morph_F -- unlabeled morpheme precision, recall and F
  (Johnson, Griffiths & Goldwater 2007): a predicted morph is correct when
  its character span ``(start, end)`` is the span of a gold morph of the same
  word, so in ``anana`` = ``an an a`` the two ``an`` are different morphs;
  P = correct / predicted morphs, R = correct / gold morphs.
* exact -- words whose predicted spans are exactly the gold spans / words.
* boundary_P / boundary_R / boundary_F -- the Morpho Challenge boundary
  convention (Creutz; not SIGMORPHON 2022's official metric, which scores
  morph strings and edit distance): only *internal* boundaries (after character i, 0 < i < len)
  count, word-initial and word-final positions never; P = correct predicted
  boundaries / predicted boundaries, R = correct / gold boundaries.  A word
  with no internal gold boundary and no predicted one adds nothing to either
  (it is counted in ``exact`` and the morph scores only).  When a denominator
  is 0 over the whole file (no predicted boundary at all, or no gold one) the
  precision (recall) is undefined and written ``nan``, never 0 or 1.

F = 2PR / (P + R) = 2H / (2H + I + D) (H correct, I predicted only, D gold
only): 0 when nothing is correct -- also when P is undefined because nothing
was predicted (the one-morph baseline's boundary F) -- and nan only when
neither side has anything.

An *unparsed* predicted word (``word<TAB>_``) is scored with zero correct
morphs, zero predicted morphs and no boundaries: its gold morphs and
boundaries stay in the recall denominators; it is never replaced by a
baseline segmentation.

Baselines, scored the same way on the same gold: ``one-morph`` (every word
one morph, no boundary) and ``chars`` (every character a morph).  The
*overlap* of a prediction with a baseline is the number of parsed predicted
words whose segmentation equals the baseline's, divided by the parsed words.
"""
from __future__ import annotations

from grind.eval.number import NEAR, frac, near

from grind.errors import InputError
from grind.formats.textio import one_line

BASELINES = ("one-morph", "chars")
COLUMNS = ("system", "words", "unparsed", "morph_P", "morph_R", "morph_F", "exact",
           "boundary_P", "boundary_R", "boundary_F", "overlap_one", "overlap_chars")
MEASURES = ("morph_P", "morph_R", "morph_F", "exact", "boundary_P", "boundary_R", "boundary_F")


def baseline_spans(word: str, kind: str) -> tuple[tuple[int, int], ...]:
    """``one-morph``: ((0, n),); ``chars``: ((0, 1), (1, 2), ..., (n-1, n))."""
    n = len(word)
    if kind == "one-morph":
        return ((0, n),)
    if kind == "chars":
        return tuple((i, i + 1) for i in range(n))
    raise ValueError(kind)


def boundaries(spans) -> set[int]:
    """Internal boundary positions of a segmentation (span ends other than the word end)."""
    if not spans:
        return set()
    n = max(e for _, e in spans)
    return {e for _, e in spans if 0 < e < n}


def word_types(records, name: str) -> dict:
    """``{word: spans or None}`` in first-seen order; a word listed twice with
    different segmentations is an InputError naming both lines."""
    out: dict = {}
    first: dict = {}
    for r in records:
        sp = r.spans()
        if r.word in out:
            if out[r.word] != sp:
                raise InputError(f"{name}:{r.line}: word {r.word!r} is segmented differently on line "
                                 f"{first[r.word]} (words are scored as types, once each)")
            continue
        out[r.word], first[r.word] = sp, r.line
    return out


def check_gold(gold: dict, name: str) -> None:
    bad = [w for w, sp in gold.items() if sp is None]
    if bad:
        raise InputError(f"{name}: gold word {bad[0]!r} has no segmentation ('_')"
                         f"{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''}")


def check_same_words(gold: dict, pred: dict, gold_name: str, pred_name: str) -> None:
    """GOLD and PRED must hold the same word types; the error names the first missing / extra ones."""
    missing = [w for w in gold if w not in pred]
    extra = [w for w in pred if w not in gold]
    for words, what in ((missing, f"missing from {pred_name}"), (extra, f"in {pred_name} but not in {gold_name}")):
        if words:
            shown = ", ".join(repr(w) for w in words[:5])
            raise InputError(f"{len(words)} word(s) {what}: {shown}{' ...' if len(words) > 5 else ''} "
                             "(GOLD and PRED must hold the same words)")


#: Per-word counts of :func:`word_counts`, in column order.
COUNTS = ("words", "unparsed", "mc", "mp", "mg", "exact", "bc", "bp", "bg", "parsed", "same_one", "same_chars")


def word_counts(w: str, g, p) -> tuple[int, ...]:
    """One word's counts (:data:`COUNTS`) for gold spans ``g`` and predicted spans ``p`` (None = unparsed)."""
    gb = boundaries(g)
    if p is None:
        return (1, 1, 0, 0, len(g), 0, 0, 0, len(gb), 0, 0, 0)
    pb = boundaries(p)
    return (1, 0, len(set(g) & set(p)), len(p), len(g), int(tuple(p) == tuple(g)), len(gb & pb), len(pb),
            len(gb), 1, int(tuple(p) == baseline_spans(w, "one-morph")),
            int(tuple(p) == baseline_spans(w, "chars")))


def score(gold: dict, pred: dict, system: str = "predicted") -> dict:
    """One row (see :data:`COLUMNS`) for predicted spans ``pred[word]`` (None = unparsed)."""
    sums = [sum(col) for col in zip(*(word_counts(w, g, pred[w]) for w, g in gold.items()))] or [0] * len(COUNTS)
    t = dict(zip(COUNTS, sums))
    mp, mr = _div(t["mc"], t["mp"]), _div(t["mc"], t["mg"])
    bp, br = _div(t["bc"], t["bp"]), _div(t["bc"], t["bg"])
    return {"system": system, "words": t["words"], "unparsed": t["unparsed"],
            "morph_P": mp, "morph_R": mr, "morph_F": _f(t["mc"], t["mp"], t["mg"]),
            "exact": _div(t["exact"], t["words"]),
            "boundary_P": bp, "boundary_R": br, "boundary_F": _f(t["bc"], t["bp"], t["bg"]),
            "overlap_one": _div(t["same_one"], t["parsed"]), "overlap_chars": _div(t["same_chars"], t["parsed"]),
            "counts": t}


def _tested():
    """The measures :func:`significance_rows` tests: name -> score of summed :data:`COUNTS` columns."""
    from grind.eval.significance import f_score, ratio
    i = COUNTS.index
    return {"exact": ratio(i("exact"), i("words")), "morph_F": f_score(i("mc"), i("mp"), i("mg")),
            "boundary_F": f_score(i("bc"), i("bp"), i("bg"))}


def significance_rows(gold: dict, predicted: dict, rng, samples: int) -> list[tuple]:
    """Each predicted system (name -> spans, in order) against every later one and against the
    one-morph and every-character baselines, by
    :func:`grind.eval.significance.approximate_randomization` over the word types: rows
    (system, against, measure, score, against_score, p) for exact, morph_F and boundary_F."""
    import numpy as np
    from grind.eval.significance import approximate_randomization, comparisons
    systems = dict(predicted)
    systems.update({f"baseline-{b}": {w: baseline_spans(w, b) for w in gold} for b in BASELINES})
    stats = {n: np.array([word_counts(w, g, sp[w]) for w, g in gold.items()], dtype=np.float64)
             .reshape(-1, len(COUNTS)) for n, sp in systems.items()}
    rows = []
    for a, b in comparisons(predicted, [f"baseline-{b}" for b in BASELINES]):
        for m, f in _tested().items():
            x, y, pv = approximate_randomization(stats[a], stats[b], f, rng, samples)
            rows.append((a, b, m, x, y, pv))
    return rows


def evaluate(gold_records, pred_records, gold_name: str = "GOLD", pred_name: str = "PRED") -> dict:
    """Score segmentation records (:func:`grind.formats.segmentations.read_segmentations`)."""
    gold = word_types(gold_records, gold_name)
    check_gold(gold, gold_name)
    pred = word_types(pred_records, pred_name)
    check_same_words(gold, pred, gold_name, pred_name)
    return score(gold, pred)


def baseline_rows(gold: dict) -> dict:
    """``{"one-morph": row, "chars": row}`` scored as :func:`score` scores a prediction."""
    return {b: score(gold, {w: baseline_spans(w, b) for w in gold}, f"baseline-{b}") for b in BASELINES}


def _div(a, b):
    return a / b if b else float("nan")


def _f(correct, predicted, gold):
    """F = 2H / (2H + I + D) = 2 correct / (predicted + gold): 0 when nothing is correct (a
    prediction with no boundary at all, where P is undefined), nan only when both sides are empty."""
    return 2 * correct / (predicted + gold) if predicted + gold else float("nan")


def near_baseline_notes(row, base, within: float = NEAR) -> list[str]:
    """``# note:`` lines for morph_F / boundary_F within ``within`` (inclusive) of a baseline's."""
    out = []
    for m in ("morph_F", "boundary_F"):
        for b in BASELINES:
            x, y = row[m], base[b][m]
            if near(x, y, within):
                out.append(f"# note: {m} {frac(x)} is within {100 * within:g} point of the {b} baseline's "
                           f"{frac(y)}\n")
    return out


def definitions(gold_name: str, n_lines: int, n_types: int) -> list[str]:
    """The ``#`` lines that say what the columns of :func:`format_table` mean."""
    dup = n_lines - n_types
    return [
        f"# gold: {one_line(gold_name)}: {n_lines} lines, {n_types} word types"
        f"{f' ({dup} duplicate lines counted once)' if dup else ''}\n",
        "# convention: scored over word TYPES (a word listed more than once counts once), counts pooled over "
        "the words (micro-averaged); F = 2PR/(P+R) = 2H/(2H+I+D), 0 when nothing is correct\n",
        "# morph_P / morph_R / morph_F: unlabeled morpheme precision / recall / F (Johnson, Griffiths & "
        "Goldwater 2007): a predicted morph is correct iff its character span (start, end) is a gold morph "
        "span of the same word\n",
        "# exact: words whose predicted segmentation is exactly the gold one / words\n",
        "# boundary_P / boundary_R / boundary_F: internal boundaries only (Morpho Challenge; not SIGMORPHON "
        "2022's official morph-string metric): "
        "word-initial and word-final positions are excluded; a word with no internal gold boundary and no "
        "predicted one contributes nothing to boundary P/R; a P (R) with no predicted (gold) boundary in the "
        "whole file is undefined and written nan; F = 2H / (2H + I + D) (H correct, I predicted only, D gold only) is "
        "0 when nothing is correct, even where P or R is nan, and nan only when neither side has a boundary\n",
        "# unparsed: predicted words written 'word<TAB>_' (no parse): zero correct and zero predicted morphs, "
        "no boundaries; their gold morphs and boundaries stay in the recall denominators\n",
        "# overlap_one / overlap_chars: parsed predicted words whose segmentation equals the one-morph / "
        "every-character baseline's, divided by the parsed predicted words\n",
        "# baselines: rows baseline-one-morph (every word one morph) and baseline-chars (every character a "
        "morph), the gold words scored the same way\n",
        f"# note lines: a morph_F or boundary_F within {100 * NEAR:g} point ({NEAR}) of a baseline's\n",
    ]


def format_table(rows, header: bool = True) -> str:
    out = ["\t".join(COLUMNS) + "\n"] if header else []
    for r in rows:
        out.append("\t".join(str(r[c]) if isinstance(r[c], (int, str)) else f"{frac(r[c])}" for c in COLUMNS) + "\n")
    return "".join(out)


def format_report(row, base, name: str) -> str:
    """One predicted file's block: ``# predicted: NAME``, its table and the ``# note:`` lines."""
    return f"# predicted: {one_line(name)}\n" + format_table([row]) + "".join(near_baseline_notes(row, base))


def format_baselines(base) -> str:
    return "# baselines on GOLD\n" + format_table([base[b] for b in BASELINES])


def format_spread(rows) -> str:
    """Mean and sample standard deviation of several predicted files' measures."""
    import numpy as np
    out = [f"# {len(rows)} predicted files: mean and sample standard deviation\n", "measure\tmean\tsd\n"]
    for m in MEASURES:
        v = np.array([r[m] for r in rows], dtype=np.float64)
        out.append(f"{m}\t{frac(v.mean())}\t{frac(v.std(ddof=1))}\n")
    return "".join(out)
