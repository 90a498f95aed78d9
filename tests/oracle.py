"""Brute-force reference for the ChartParser contract (no chart algorithm).

Every derivation of a token sequence from ``grammar.start`` is listed by a plain
top-down recursion over (symbol, span): a nonterminal ``A`` over ``[i, j)`` is
rewritten by each rule ``A --> X1 ... Xk`` and the span is cut into ``k``
non-empty pieces in every possible way; a terminal piece must be exactly the one
matching token, a nonterminal piece is enumerated recursively.  This covers
binary rules, unary chains, n-ary rules mixing terminals and nonterminals, and
lexical rules with several terminals, with no binarisation or chart.

A derivation is returned in the contract format of :mod:`grind.kernels.contract`: an
``int64`` array of ``(rule, start, end)`` rows in pre-order (a node, then its
nonterminal children left to right; terminals are not nodes).

Its weight is the plain product of the weights of its rules (multiplied along
the recursion, so equal to ``math.prod`` up to rounding); zero-weight
derivations are listed too (with weight 0).

Unary cycles: with ``max_nodes=None`` the grammar must have no unary cycle
(one is reported as ``ValueError``); with ``max_nodes=N`` only derivations with
at most ``N`` nodes are listed, which bounds the recursion for any grammar.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

__all__ = [
    "enumerate_derivations", "all_derivations", "count_derivations", "derivation_key", "derivation_weight",
    "exact_logz", "exact_counts", "exact_viterbi", "exact_posterior",
    "is_derivation_of", "chisquare_gof",
]


def _rules_by_lhs(grammar):
    by = {}
    for r, (lhs, rhs) in enumerate(grammar.rules):
        by.setdefault(lhs, []).append((r, rhs))
    return by


def _enumerate(grammar, weights, tokens, max_nodes):
    """List of (rows tuple, weight) for grammar.start over the whole sentence."""
    weights = [float(w) for w in np.asarray(weights, dtype=np.float64)]
    by_lhs = _rules_by_lhs(grammar)
    is_nt = grammar.is_nonterminal
    tokens = list(tokens)
    n = len(tokens)
    memo = {}
    on_stack = set()

    def sym_span(sym, i, j, budget):
        # derivations of nonterminal sym over [i, j) with at most `budget` nodes
        key = (sym, i, j, budget)
        if key in memo:
            return memo[key]
        if budget is None:
            if (sym, i, j) in on_stack:
                raise ValueError(f"unary cycle through {sym!r} over span [{i}, {j}); "
                                 "pass max_nodes to bound the recursion")
            on_stack.add((sym, i, j))
        out = []
        for r, rhs in by_lhs.get(sym, ()):
            w_r = weights[r]
            row = (r, i, j)
            sub = None if budget is None else budget - 1
            for kids, w_kids in rhs_span(rhs, 0, i, j, sub):
                out.append(((row,) + kids, w_r * w_kids))
        if budget is None:
            on_stack.discard((sym, i, j))
        memo[key] = out
        return out

    def rhs_span(rhs, k, i, j, budget):
        # ways to derive rhs[k:] over [i, j): list of (rows, weight); budget = nodes left
        m = len(rhs) - k
        if m == 0:
            return [((), 1.0)] if i == j else []
        if j - i < m:            # every symbol covers at least one token
            return []
        if budget is not None:
            n_nt = sum(1 for s in rhs[k:] if is_nt(s))
            if n_nt > budget:
                return []
        sym = rhs[k]
        out = []
        if not is_nt(sym):
            if tokens[i] == sym:
                out.extend(rhs_span(rhs, k + 1, i + 1, j, budget))
            return out
        last = j if m == 1 else j - (m - 1)
        for e in range(i + 1, last + 1):
            if m == 1 and e != j:
                continue
            if budget is None:
                firsts = sym_span(sym, i, e, None)
                if not firsts:
                    continue
                rests = rhs_span(rhs, k + 1, e, j, None)
                for rows_a, w_a in firsts:
                    for rows_b, w_b in rests:
                        out.append((rows_a + rows_b, w_a * w_b))
            else:
                n_nt_rest = sum(1 for s in rhs[k + 1:] if is_nt(s))
                firsts = sym_span(sym, i, e, budget - n_nt_rest)
                for rows_a, w_a in firsts:
                    for rows_b, w_b in rhs_span(rhs, k + 1, e, j, budget - len(rows_a)):
                        out.append((rows_a + rows_b, w_a * w_b))
        return out

    if n == 0:
        return []
    return sym_span(grammar.start, 0, n, max_nodes)


def count_derivations(grammar, tokens) -> int:
    """Number of derivations of ``tokens`` (any weight) without listing them, by
    the same recursion with integer counts.  For choosing test sentences of a
    manageable size before enumerating; needs an acyclic unary relation."""
    by_lhs = _rules_by_lhs(grammar)
    is_nt = grammar.is_nonterminal
    tokens = list(tokens)
    memo = {}

    def sym_span(sym, i, j):
        key = (sym, i, j)
        if key not in memo:
            memo[key] = None
            memo[key] = sum(rhs_span(rhs, 0, i, j) for _, rhs in by_lhs.get(sym, ()))
        elif memo[key] is None:
            raise ValueError(f"unary cycle through {sym!r}")
        return memo[key]

    def rhs_span(rhs, k, i, j):
        m = len(rhs) - k
        if m == 0:
            return int(i == j)
        if j - i < m:
            return 0
        sym = rhs[k]
        if not is_nt(sym):
            return rhs_span(rhs, k + 1, i + 1, j) if tokens[i] == sym else 0
        if m == 1:
            return sym_span(sym, i, j)
        return sum(sym_span(sym, i, e) * rhs_span(rhs, k + 1, e, j)
                   for e in range(i + 1, j - m + 2))

    return sym_span(grammar.start, 0, len(tokens)) if tokens else 0


def enumerate_derivations(grammar, weights, tokens, max_nodes=None):
    """Yield ``(derivation, weight)`` for every derivation of ``tokens`` from
    ``grammar.start``: ``derivation`` is an int64 ``(n_nodes, 3)`` array of
    ``(rule, start, end)`` rows in pre-order, ``weight`` the product of
    ``weights[rule]`` over its nodes (0 for derivations using a zero-weight rule).
    """
    for rows, w in _enumerate(grammar, weights, tokens, max_nodes):
        yield np.array(rows, dtype=np.int64).reshape(-1, 3), w


def all_derivations(grammar, weights, tokens, max_nodes=None):
    """``[(key, weight)]`` with ``key`` the derivation as a tuple of row tuples."""
    return list(_enumerate(grammar, weights, tokens, max_nodes))


def derivation_key(d) -> tuple:
    """A hashable form of a derivation array: tuple of (rule, start, end) tuples."""
    d = np.asarray(d, dtype=np.int64).reshape(-1, 3)
    return tuple((int(a), int(b), int(c)) for a, b, c in d)


def derivation_weight(d, weights) -> float:
    """Product of the weights of a derivation's rules (pre-order)."""
    return math.prod(float(weights[r]) for r, _, _ in derivation_key(d))


def exact_logz(grammar, weights, tokens, max_nodes=None) -> float:
    """log of the sum of the weights of all derivations (-inf when none is positive)."""
    z = math.fsum(w for _, w in _enumerate(grammar, weights, tokens, max_nodes))
    return math.log(z) if z > 0 else -math.inf


def exact_counts(grammar, weights, tokens, max_nodes=None) -> np.ndarray:
    """``sum_t P(t | w) f(t)``: expected rule counts (zeros when Z = 0)."""
    derivs = _enumerate(grammar, weights, tokens, max_nodes)
    z = math.fsum(w for _, w in derivs)
    out = np.zeros(len(grammar.rules), dtype=np.float64)
    if not z > 0:
        return out
    per_rule = [[] for _ in range(len(grammar.rules))]
    for rows, w in derivs:
        if w == 0:
            continue
        p = w / z
        for r, _, _ in rows:
            per_rule[r].append(p)
    for r, ps in enumerate(per_rule):
        out[r] = math.fsum(ps)
    return out


def exact_viterbi(grammar, weights, tokens, max_nodes=None, tie_rtol=1e-9):
    """``(derivation, logprob, unique)`` of the highest-weight derivation.

    ``(None, -inf, False)`` when no derivation has positive weight.  ``unique``
    is False when another derivation's weight is within ``tie_rtol`` of the best.
    """
    derivs = [(k, w) for k, w in _enumerate(grammar, weights, tokens, max_nodes) if w > 0]
    if not derivs:
        return None, -math.inf, False
    derivs.sort(key=lambda kw: kw[1], reverse=True)
    best_k, best_w = derivs[0]
    unique = len(derivs) == 1 or derivs[1][1] < best_w * (1 - tie_rtol)
    return np.array(best_k, dtype=np.int64).reshape(-1, 3), math.log(best_w), unique


def exact_posterior(grammar, weights, tokens, max_nodes=None) -> dict:
    """``{derivation_key: P(t | w)}`` over derivations of positive weight ({} if none)."""
    derivs = [(k, w) for k, w in _enumerate(grammar, weights, tokens, max_nodes) if w > 0]
    z = math.fsum(w for _, w in derivs)
    if not z > 0:
        return {}
    post = {}
    for k, w in derivs:
        assert k not in post, "oracle listed a derivation twice"
        post[k] = w / z
    return post


def is_derivation_of(grammar, tokens, d) -> bool:
    """Whether ``d`` (contract format) is a well-formed derivation of ``tokens``
    from ``grammar.start``, checked node by node (independent of the enumerator)."""
    rows = derivation_key(d)
    n = len(tokens)
    pos = 0

    def node(i, j):
        nonlocal pos
        if pos >= len(rows):
            return False
        r, a, b = rows[pos]
        pos += 1
        if (a, b) != (i, j) or not 0 <= r < len(grammar.rules):
            return False
        return r

    def check(sym, i, j):
        r = node(i, j)
        if r is False or grammar.rules[r][0] != sym:
            return False
        rhs = grammar.rules[r][1]
        k = i
        for s in rhs:
            if not grammar.is_nonterminal(s):
                if k >= j or tokens[k] != s:
                    return False
                k += 1
                continue
            if pos >= len(rows):
                return False
            _, a, b = rows[pos]
            if a != k or b <= a or b > j:
                return False
            if not check(s, a, b):
                return False
            k = b
        return k == j

    ok = n > 0 and check(grammar.start, 0, n) and pos == len(rows)
    return bool(ok)


def chisquare_gof(sample_keys, posterior: dict, min_expected: float = 5.0):
    """Chi-square goodness of fit of sampled derivations to an exact posterior.

    ``sample_keys``: derivation keys (see :func:`derivation_key`).  Cells are the
    derivations of positive posterior mass; cells whose expected count is below
    ``min_expected`` are pooled (smallest first) into one cell, which is merged
    into the next-smallest cell while still below it.  Returns
    ``(p_value, n_cells, n_outside)`` where ``n_outside`` counts samples that are
    not derivations of positive posterior mass (they make the p-value 0).
    """
    from scipy.stats import chisquare

    n = len(sample_keys)
    obs = Counter(sample_keys)
    n_outside = sum(c for k, c in obs.items() if k not in posterior)
    if n_outside:
        return 0.0, 0, n_outside
    items = sorted(posterior.items(), key=lambda kv: kv[1], reverse=True)
    exp = [p * n for _, p in items]
    cnt = [obs.get(k, 0) for k, _ in items]
    keep_e, keep_o = [], []
    pool_e, pool_o = 0.0, 0
    for e, o in zip(exp, cnt):
        if e >= min_expected:
            keep_e.append(e)
            keep_o.append(o)
        else:
            pool_e += e
            pool_o += o
    if pool_e > 0:
        while pool_e < min_expected and keep_e:
            pool_e += keep_e.pop()
            pool_o += keep_o.pop()
        keep_e.append(pool_e)
        keep_o.append(pool_o)
    if len(keep_e) < 2:
        return 1.0, len(keep_e), 0
    f_exp = np.array(keep_e)
    f_obs = np.array(keep_o, dtype=np.float64)
    f_exp *= f_obs.sum() / f_exp.sum()      # guard against rounding in sum(p) != 1
    return float(chisquare(f_obs, f_exp).pvalue), len(keep_e), 0


def check_sparse_counts_local(parser, w, i, n_sentences):
    """The one-sentence hooks' contract (``local_rules`` / ``sparse_counts``,
    used by collapsed VB): weights outside ``local_rules(i)`` are never read
    (NaN there changes nothing), a NaN / negative / infinite local weight stops
    with ``NumericalError``, an index past the corpus is an ``IndexError``.
    Returns ``(local rules, rules, values, log Z)`` of sentence ``i`` under ``w``."""
    import pytest

    from grind.errors import NumericalError
    loc = parser.local_rules(i)
    rules, vals, z = parser.sparse_counts(w, i)
    bad = w.copy()
    bad[np.setdiff1d(np.arange(len(w)), loc)] = np.nan
    r2, v2, z2 = parser.sparse_counts(bad, i)
    np.testing.assert_array_equal(rules, r2)
    np.testing.assert_array_equal(vals, v2)
    assert z == z2
    for x in (np.nan, -1.0, np.inf):
        bad = w.copy()
        bad[loc[len(loc) // 2]] = x
        with pytest.raises(NumericalError):
            parser.sparse_counts(bad, i)
    with pytest.raises(IndexError):
        parser.sparse_counts(w, n_sentences)
    return loc, rules, vals, z


def assert_seed_follows_the_request(parser, weights):
    """``parser.sample`` over items [0, 1] and [2, 1], where item 0 fails and
    item 2 is a copy of item 1 that parses: item 1 gets the second seed drawn
    either way (its draws agree for every rng seed), and draws do differ
    across rng seeds."""
    draws = []
    for seed in range(4):
        a = parser.sample(weights, np.random.default_rng(seed), [0, 1])
        b = parser.sample(weights, np.random.default_rng(seed), [2, 1])
        assert a[0] is None and b[0] is not None
        np.testing.assert_array_equal(a[1], b[1])
        draws.append(derivation_key(a[1]))
    assert len(set(draws)) > 1

