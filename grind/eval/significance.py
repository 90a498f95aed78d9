"""Paired significance of a difference between two systems' corpus-level scores.

The test is the paired approximate randomization test (Noreen 1989; its use
for NLP scores in Yeh 2000 and Riezler & Maxwell 2005).  Each item i (a word
type, a sentence) has a vector of sufficient statistics a_i for system A and
b_i for system B (correct / predicted / gold counts), and the score is a
function f of the summed vectors, e.g. boundary F = 2 sum c / (sum p + sum g).
Under the null hypothesis that the two systems are exchangeable, swapping
a_i and b_i for any item leaves the distribution of the difference unchanged,
so with R samples, each swapping every item independently with probability
1/2,

    d* = | f(sum_i a'_i) - f(sum_i b'_i) |,      p = (r + 1) / (R + 1),

r being the number of samples with d* >= the observed |f(sum a) - f(sum b)|
(two-sided; the +1 counts the observed assignment itself, so p > 0).
A swap of item i moves b_i - a_i from B's sums to A's, so a batch of samples
is one product of a 0/1 swap matrix with the (items x statistics) matrix of
differences.
"""
from __future__ import annotations

from grind.eval.number import frac, signed
import numpy as np

#: Samples of the randomization test unless the caller says otherwise.
SAMPLES = 10_000
_BATCH = 256


def approximate_randomization(a, b, score, rng, samples: int = SAMPLES) -> tuple[float, float, float]:
    """``(score(A), score(B), p)`` for per-item statistics ``a``, ``b`` of shape
    (items, k); ``score`` maps an (m, k) array of summed statistics to m scores."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"paired statistics must have one shape (items, k): {a.shape} vs {b.shape}")
    sa, sb = a.sum(axis=0), b.sum(axis=0)
    fa, fb = (float(x) for x in score(np.stack([sa, sb])))
    if np.isnan(fa) or np.isnan(fb):
        return fa, fb, float("nan")
    observed = abs(fa - fb)
    diff = b - a
    hits = 0
    for start in range(0, samples, _BATCH):
        m = rng.integers(0, 2, size=(min(_BATCH, samples - start), len(a))).astype(np.float64)
        moved = m @ diff
        d = np.abs(score(sa + moved) - score(sb - moved))
        hits += int(np.count_nonzero(d >= observed - 1e-12 * max(1.0, observed)))
    return fa, fb, (hits + 1) / (samples + 1)


def comparisons(names, baselines) -> list[tuple[str, str]]:
    """The (system, against) pairs tested: every system against every later one, then against each baseline."""
    names = list(names)
    return [(a, b) for k, a in enumerate(names) for b in [*names[k + 1:], *baselines]]


def definition(samples: int, item: str) -> str:
    return (f"# significance: paired approximate randomization test (Noreen 1989; Riezler & Maxwell 2005), "
            f"{samples} samples, each swapping the two systems' outputs of every {item} with probability 1/2; "
            "two-sided p = (r + 1) / (samples + 1), r = samples whose |difference| >= the observed one\n")


COLUMNS = ("system", "against", "measure", "score", "against_score", "difference", "p")


def format_rows(rows) -> str:
    """``rows``: (system, against, measure, score, against_score, p) tuples."""
    out = ["\t".join(COLUMNS) + "\n"]
    for s, o, m, x, y, p in rows:
        out.append(f"{s}\t{o}\t{m}\t{frac(x)}\t{frac(y)}\t{signed(x - y)}\t{p:.4g}\n")
    return "".join(out)


def ratio(num: int, den: int):
    """A score that is sum of column ``num`` / sum of column ``den`` (nan where the sum is 0)."""
    def f(s):
        with np.errstate(divide="ignore", invalid="ignore"):
            return s[:, num] / s[:, den]
    return f


def f_score(correct: int, predicted: int, gold: int):
    """F = 2 sum correct / (sum predicted + sum gold) = 2H / (2H + I + D), the harmonic mean of
    P = correct / predicted and R = correct / gold where both are defined; 0 when nothing is correct
    (also when P is undefined: nothing predicted), nan only when both sums are 0, as the score tables write it."""
    def f(s):
        p, g = s[:, predicted], s[:, gold]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(p + g > 0, 2 * s[:, correct] / (p + g), np.nan)
    return f
