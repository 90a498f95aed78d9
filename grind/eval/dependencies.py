"""Dependency evaluation, the attach-left / attach-right baselines and the overlap with them.

Directed attachment accuracy = words whose predicted head is the gold head,
divided by words; the root attachment counts as one arc (head 0).  Undirected
accuracy also accepts a predicted arc h -> d when the gold tree has d -> h.
Scores are reported for sentences of length <= 10, <= 20 and all, lengths
counted after punctuation removal; which tokens were scored is stated.

A predicted sentence without heads (marked ``# grind_unparsed = ...`` by grind
parse, whose HEAD column is then filler, or HEAD ``_`` on every token: the
parser found no tree) is *unparsed*: its words stay in the denominator with 0
correct, and the unparsed sentences are counted per subset.  It is never
replaced by a baseline tree.  A predicted sentence marked ``# grind_left_out``
(the corpus options of the command that wrote it left it out) is not scored:
scoring one is an error (read both files with those options).

Baselines (Klein & Manning 2004 §3; Cohen & Smith 2010 §5.1) are the
attach-right and attach-left trees of the gold sentences, scored the same
way.  The *overlap* of a prediction with a baseline is

    overlap_b = #{words of parsed predicted sentences whose predicted head
                  equals the baseline-b head} / #{words of parsed predicted sentences}

so a parser that only reproduces attach-right has overlap_right = 1.
"""
from __future__ import annotations

from grind.eval.number import NEAR, frac, near
from grind.errors import InputError
from grind.formats.textio import one_line

SUBSETS = ((10, "<=10"), (20, "<=20"), (None, "all"))
BASELINES = ("right", "left")
COLUMNS = ("subset", "sentences", "words", "directed", "undirected", "unparsed", "overlap_right", "overlap_left")


def attach_heads(n: int, direction: str) -> list[int]:
    """Baseline trees (Klein & Manning 2004; Cohen & Smith 2010 §5.1).

    right: every word's head is its right neighbour, the last word is the root;
    left: every word's head is its left neighbour, the first word is the root.
    """
    if direction == "right":
        return [i + 2 if i + 1 < n else 0 for i in range(n)]
    if direction == "left":
        return [i if i > 0 else 0 for i in range(n)]
    raise ValueError(direction)


def score_sentence(gold: list[int], pred: list[int]) -> tuple[int, int]:
    """(directed, undirected) correct arcs of one sentence (heads 1-based, 0 = root)."""
    directed = undirected = 0
    for d, (g, p) in enumerate(zip(gold, pred), 1):
        if p == g:
            directed += 1
            undirected += 1
        elif p != 0 and gold[p - 1] == d:
            undirected += 1
    return directed, undirected


def evaluate(gold_sents, pred_sents, baselines: bool = True) -> list[dict]:
    """One row per subset: ``{subset, sentences, words, directed, undirected,
    unparsed[, overlap_right, overlap_left]}`` (accuracies and overlaps as
    fractions; nan when the subset has no words).  A predicted sentence with
    ``heads is None`` is unparsed (0 correct, words counted)."""
    if len(gold_sents) != len(pred_sents):
        raise InputError(f"{len(gold_sents)} gold sentences but {len(pred_sents)} predicted; "
                         "read both with the same --punct/--max-length options")
    for g, p in zip(gold_sents, pred_sents):
        _check_aligned(g, p)
    return score_heads(gold_sents, [p.heads for p in pred_sents], baselines)


def baseline_rows(gold_sents) -> dict[str, list[dict]]:
    """``{"right": rows, "left": rows}``: the attach-right / attach-left trees of
    the gold sentences scored as :func:`evaluate` scores a prediction."""
    for g in gold_sents:
        _check_gold(g)
    return {b: score_heads(gold_sents, [attach_heads(len(g), b) for g in gold_sents])
            for b in BASELINES}


def score_heads(gold_sents, pred_heads, baselines: bool = True) -> list[dict]:
    """Rows of :func:`evaluate` for predicted head lists (``None`` = unparsed)."""
    # per subset: sentences, words, directed, undirected, unparsed, parsed words, same-as-right, same-as-left
    tot = {name: [0] * 8 for _, name in SUBSETS}
    for g, p in zip(gold_sents, pred_heads):
        n = len(g)
        if p is None:
            add = [1, n, 0, 0, 1, 0, 0, 0]
        else:
            dc, uc = score_sentence(g.heads, list(p))
            same = [sum(int(a == b) for a, b in zip(p, attach_heads(n, d))) for d in BASELINES]
            add = [1, n, dc, uc, 0, n, *same]
        for limit, name in SUBSETS:
            if limit is None or n <= limit:
                tot[name] = [a + b for a, b in zip(tot[name], add)]
    rows = []
    for name, (s, w, dc, uc, un, pw, sr, sl) in tot.items():
        row = {"subset": name, "sentences": s, "words": w, "directed": _div(dc, w),
               "undirected": _div(uc, w), "unparsed": un}
        if baselines:
            row.update(overlap_right=_div(sr, pw), overlap_left=_div(sl, pw))
        rows.append(row)
    return rows


def significance_rows(gold_sents, predicted: dict, rng, samples: int, baselines: bool = True) -> list[tuple]:
    """Each predicted system (name -> head lists, None = unparsed, in order) against every later one and
    (with ``baselines``) against attach-right / attach-left, by
    :func:`grind.eval.significance.approximate_randomization` over the sentences of each subset:
    rows (system, against, "directed:SUBSET", score, against_score, p)."""
    import numpy as np
    from grind.eval.significance import approximate_randomization, comparisons, ratio
    systems = dict(predicted)
    if baselines:
        systems.update({f"attach-{b}": [attach_heads(len(g), b) for g in gold_sents] for b in BASELINES})
    stats = {n: np.array([(0 if p is None else score_sentence(g.heads, list(p))[0], len(g))
                          for g, p in zip(gold_sents, heads)], dtype=np.float64).reshape(-1, 2)
             for n, heads in systems.items()}
    lengths = np.array([len(g) for g in gold_sents])
    rows = []
    for a, b in comparisons(predicted, [n for n in systems if n not in predicted]):
        tested: dict = {}           # a subset holding the same sentences as an earlier one has its test
        for limit, sub in SUBSETS:
            keep = lengths <= limit if limit is not None else np.ones(len(lengths), dtype=bool)
            if not keep.any():
                continue
            key = keep.tobytes()
            if key not in tested:
                tested[key] = approximate_randomization(stats[a][keep], stats[b][keep], ratio(0, 1), rng, samples)
            rows.append((a, b, f"directed:{sub}", *tested[key]))
    return rows


def check_parse_punct(path, punct, head=None) -> None:
    """A prediction that grind parse or baseline wrote under another punctuation rule than the one it is
    scored with is an error: the tokens that rule removed were attached to the root word as filler.
    ``head``: its header as read already (a stream); by default read from the file (a stream: none)."""
    import re

    from grind.formats.textio import read_header
    if head is None:
        head = read_header(path)
    m = re.search(r"\bpunct-removed=(\S+)", head.get("corpus", ""))
    if m and "removed_tokens" in head and m[1] != punct:
        raise InputError(f"{path} was written with punct-removed={m[1]} (its '# corpus:' header) but is scored with "
                         f"--punct {punct}: the tokens it removed are attached to the root word as filler, not "
                         f"predictions; score it with --punct {m[1]}")


#: The DEPRELs grind parse / baseline write: predicted arcs, the root, filler for removed tokens, unparsed.
GRIND_DEPRELS = frozenset(["dep", "root", "punct", "_"])


def check_filler_rows(path, pred_sents, punct) -> None:
    """A prediction without its header (lost to ``grep -v '^#'`` or a format conversion) cannot say which
    punctuation rule made it; but grind's predictions label every arc ``dep`` or ``root`` and the tokens
    its rule removed ``punct`` (attached to the root word as filler).  A file labelled only so, with
    ``punct`` rows among the tokens scored under ``punct``, is grind output made with another rule: an
    error, not a score of filler as predictions."""
    labels, filler = set(), []
    for s in pred_sents:
        for r in s.rows or ():
            if len(r) > 7:
                labels.add(r[7])
                if r[7] == "punct":
                    filler.append((s.number, r[0]))
    if filler and "dep" in labels and labels <= GRIND_DEPRELS:
        n, i = filler[0]
        raise InputError(f"{path} labels its arcs as grind parse does (dep, root) and {len(filler)} of the tokens "
                         f"--punct {punct} scores 'punct' (sentence {n}, word {i}): the filler grind writes for "
                         "tokens its punctuation rule removed, not predictions; score it with the --punct it was "
                         "made with (its '# corpus:' header, lost here, said which)")


def _div(a, b):
    return a / b if b else float("nan")


def _check_gold(g):
    if g.heads is None:
        raise InputError(f"gold sentence {g.number} (line {g.line}) has no HEAD column")


def _check_aligned(g, p):
    _check_gold(g)
    if p.mark == "left out":
        raise InputError(f"predicted sentence {p.number} (line {p.line}) is marked '# grind_left_out': the corpus "
                         "options of the command that wrote it left it out, but it is scored here: give grind eval "
                         "the corpus options the prediction was made with (its '# corpus:' header)")
    if g.tokens != p.tokens:
        raise InputError(f"gold sentence {g.number} (line {g.line}) and predicted sentence "
                         f"{p.number} (line {p.line}) have different tokens: "
                         f"{' '.join(g.tokens)!r} vs {' '.join(p.tokens)!r}")
    words_g, words_p = _forms(g), _forms(p)
    if words_g is not None and words_p is not None and words_g != words_p:
        raise InputError(f"gold sentence {g.number} (line {g.line}) and predicted sentence {p.number} (line "
                         f"{p.line}) have the same tokens but other words (FORM): {' '.join(words_g)!r} vs "
                         f"{' '.join(words_p)!r}: a prediction of other sentences?")


def _forms(s):
    """The FORM column of a sentence's kept rows (CoNLL, Malt-TAB), or None (plain text, PTB trees)."""
    if not s.rows or any(len(r) < 2 for r in s.rows):
        return None
    return [r[1] for r in s.rows]


def near_baseline_notes(rows, base, within: float = NEAR) -> list[str]:
    """``# note:`` lines for every subset whose directed accuracy is within
    ``within`` (inclusive) of a baseline's on the same subset."""
    out = []
    for r in rows:
        for b in BASELINES:
            br = next(x for x in base[b] if x["subset"] == r["subset"])
            if near(r["directed"], br["directed"], within):
                out.append(f"# note: {r['subset']} directed {frac(r['directed'])} is within "
                           f"{100 * within:g} point of attach-{b} {frac(br['directed'])}\n")
    return out


def definitions(convention: str, baselines: bool = True) -> list[str]:
    """The ``#`` lines that say what the columns of :func:`format_table` mean."""
    out = [f"# convention: {convention}\n",
           "# unparsed: predicted sentences without a parse (marked '# grind_unparsed', or whose HEAD column is "
           "all '_'); their words count in the denominators with 0 correct, never as a baseline tree\n"]
    if baselines:
        out += ["# overlap_right / overlap_left: words whose predicted head equals the attach-right / "
                "attach-left head, divided by the words of the parsed (not unparsed) predicted sentences\n",
                "# baselines: rows attach-right:SUBSET / attach-left:SUBSET, the gold sentences' attach-right "
                "(each word's head is its right neighbour, last word the root) and attach-left trees, "
                "scored the same way\n",
                f"# note lines: a directed accuracy within {100 * NEAR:g} point ({NEAR}) of a baseline's "
                "on the same subset\n"]
    return out


def format_table(rows, label=None, header: bool = True) -> str:
    """A header line and one TSV row per entry of ``rows``; the first column is
    ``label:SUBSET`` when ``label`` is given."""
    cols = [c for c in COLUMNS if c in rows[0]]
    out = ["\t".join(cols) + "\n"] if header else []
    for r in rows:
        vals = [f"{label}:{r['subset']}" if label else r["subset"]]
        vals += [str(r[c]) if isinstance(r[c], int) else f"{frac(r[c])}" for c in cols[1:]]
        out.append("\t".join(vals) + "\n")
    return "".join(out)


def format_baselines(base) -> str:
    """The baseline block: one header line, rows ``attach-right:<=10`` ... ``attach-left:all``."""
    return "".join(format_table(base[b], f"attach-{b}", header=(k == 0)) for k, b in enumerate(BASELINES))


def format_report(rows, convention: str, base=None, name=None, definitions_too: bool = True) -> str:
    """One predicted file's report: the ``#`` definitions, ``# predicted: NAME``,
    the table and the ``# note:`` lines (``base``: :func:`baseline_rows`)."""
    out = definitions(convention, base is not None) if definitions_too else []
    if name is not None:
        out.append(f"# predicted: {one_line(name)}\n")
    out.append(format_table(rows))
    if base is not None:
        out += near_baseline_notes(rows, base)
    return "".join(out)


def format_spread(runs) -> str:
    """Mean and sample standard deviation of several runs' accuracies (e.g. committee members)."""
    import numpy as np
    out = [f"# {len(runs)} runs: mean and sample standard deviation\n",
           "subset\tdirected_mean\tdirected_sd\tundirected_mean\tundirected_sd\n"]
    for i, name in enumerate(r["subset"] for r in runs[0]):
        d = np.array([rows[i]["directed"] for rows in runs])
        u = np.array([rows[i]["undirected"] for rows in runs])
        out.append(f"{name}\t{frac(d.mean())}\t{frac(d.std(ddof=1))}\t{frac(u.mean())}\t{frac(u.std(ddof=1))}\n")
    return "".join(out)
