"""Dependency evaluation and the attach-left / attach-right baselines.

Directed attachment accuracy = words whose predicted head is the gold head,
divided by words; the root attachment counts as one arc (head 0).  Undirected
accuracy also accepts a predicted arc h -> d when the gold tree has d -> h.
Scores are reported for sentences of length <= 10, <= 20 and all, lengths
counted after punctuation removal; which tokens were scored is stated.
"""
from __future__ import annotations

from .errors import InputError

SUBSETS = ((10, "<=10"), (20, "<=20"), (None, "all"))


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


def evaluate(gold_sents, pred_sents) -> list[dict]:
    """Rows of {subset, sentences, words, directed, undirected} (accuracies as fractions)."""
    if len(gold_sents) != len(pred_sents):
        raise InputError(f"{len(gold_sents)} gold sentences but {len(pred_sents)} predicted; "
                         "read both with the same --punct/--max-length options")
    tot = {name: [0, 0, 0, 0] for _, name in SUBSETS}
    for g, p in zip(gold_sents, pred_sents):
        _check_aligned(g, p)
        dc, uc = score_sentence(g.heads, p.heads)
        for limit, name in SUBSETS:
            if limit is None or len(g) <= limit:
                t = tot[name]
                t[0] += 1
                t[1] += len(g)
                t[2] += dc
                t[3] += uc
    return [{"subset": name, "sentences": s, "words": w,
             "directed": dc / w if w else float("nan"), "undirected": uc / w if w else float("nan")}
            for name, (s, w, dc, uc) in tot.items()]


def _check_aligned(g, p):
    if g.heads is None:
        raise InputError(f"gold sentence {g.number} (line {g.line}) has no HEAD column")
    if p.heads is None:
        raise InputError(f"predicted sentence {p.number} (line {p.line}) has no HEAD column")
    if g.tokens != p.tokens:
        raise InputError(f"gold sentence {g.number} (line {g.line}) and predicted sentence "
                         f"{p.number} (line {p.line}) have different tokens: "
                         f"{' '.join(g.tokens)!r} vs {' '.join(p.tokens)!r}")


def format_report(rows, convention: str) -> str:
    out = [f"# convention: {convention}\n", "subset\tsentences\twords\tdirected\tundirected\n"]
    out += [f"{r['subset']}\t{r['sentences']}\t{r['words']}\t{r['directed']:.4f}\t{r['undirected']:.4f}\n"
            for r in rows]
    return "".join(out)


def format_spread(runs) -> str:
    """Mean and sample standard deviation of several runs' accuracies (e.g. committee members)."""
    import numpy as np
    out = [f"# {len(runs)} runs: mean and sample standard deviation\n",
           "subset\tdirected_mean\tdirected_sd\tundirected_mean\tundirected_sd\n"]
    for i, name in enumerate(r["subset"] for r in runs[0]):
        d = np.array([rows[i]["directed"] for rows in runs])
        u = np.array([rows[i]["undirected"] for rows in runs])
        out.append(f"{name}\t{d.mean():.4f}\t{d.std(ddof=1):.4f}\t{u.mean():.4f}\t{u.std(ddof=1):.4f}\n")
    return "".join(out)
