"""Parsing raw sentences with a latent-annotation PCFG (Matsuzaki et al. 2005;
Petrov et al. 2006; Petrov & Klein 2007; Wang & Blunsom 2013, §4.3), the
output over the unsplit (base) symbols.

The grammar is over latent symbols ``X@k`` (:mod:`grind.grammars.latent`),
compiled by :class:`~grind.grammars.latent.LatentGrammar` into base rules r
with dense subtype blocks W_r (``W[a, b, c]`` for ``A@a --> B@b C@c``).

**Chart with unary layers.**  An item is a span (i, j) and a base symbol A;
its value is a vector over A's subtypes.  The lexical / binary part is

    x_0(A@a, i, i+1) = W_{A --> w_i}[a]
    x_0(A@a, i, j)   = sum_{A --> B C} sum_{i<k<j} sum_{b,c} W[a,b,c] beta(B@b, i, k) beta(C@c, k, j)

and then U = ``max_unary`` layers of unary rules,

    x_L = x_0 + Un x_{L-1}  (L = 1..U),   Un[A@a, B@b] = W_{A --> B}[a, b],   beta = x_U,

so beta = sum_{m=0..U} Un^m x_0 sums every unary chain of at most U rules over
a span exactly once: a chain of length m uses layers U, U-1, .., U-m+1 from
the top, and a label-level unary cycle (S --> VP --> S) is cut at U.  With U
at least the grammar's longest unary chain, beta is the PCFG inside score.
Z = beta(ROOT, 0, n).  The outside scores are the exact adjoint: the layer-U
adjoint gx_U of an item collects from the binary parents (and 1 at the root),
gx_{L-1} = Un^T gx_L, and the lexical / binary part's adjoint is
g_0 = sum_L gx_L, pushed to the children as
gx_U(B@b, i, k) += sum_{a,c} g_0(A@a, i, j) W[a,b,c] beta(C@c, k, j) (C likewise).

**Scaling.**  Each span keeps its values divided by 2^s_ij (largest in
[0.5, 1)); split k's terms enter with the exact factor
2^(s_ik + s_kj - max_k'(s_ik' + s_k'j)) <= 1, and the outside values are kept
at 2^s_ij / Z, so their products with inside values are posteriors directly
(csrc/latent_parse.pyx): no underflow on long sentences at any H.

**Coarse-to-fine pruning** (Petrov & Klein 2007, §2-3).  The fine grammar is
projected onto the base symbols: the expected subtype frequencies c(A@a) of a
derivation from the root solve c = e_root + c M, M[A@a, B@b] = the expected
number of B@b children of A@a = sum over rules A@a --> beta of W times the
number of B@b in beta, by fixed-point iteration (to a relative change of 1e-12
or 2000 iterations; the uniform c when it diverges); then

    P(A --> beta) = sum_a c(A@a) sum_{subtypes of beta} W / sum_a c(A@a)

(the average over subtypes where sum_a c(A@a) = 0).  Inside-outside with this
one-subtype grammar (the same kernel, H = 1) gives the posterior of every item,
P(A over (i, j)) = sum_L gx_L x_L / Z (the expected number of A nodes over
(i, j)); items below ``threshold`` are removed from the fine chart.  When the
pruned fine chart has no tree, the sentence is parsed again without pruning
(``stats["retries"]``).  A sentence the coarse grammar cannot parse has no
tree (the projection keeps every base rule that has a reachable refinement, so
the fine grammar cannot parse it either).

**Decoding.**  A node of a base tree is anchored at its span and at its
layer: the top node over a span at layer U, each unary child one layer lower,
and the chain's bottom (lexical or binary) rule at the layer where it ends.
The anchored rule posteriors, from the fine chart, are

    r_L(A --> B C, i, k, j) = sum_{a,b,c} gx_L(A@a, i, j) W[a,b,c] beta(B@b, i, k) beta(C@c, k, j) / Z
    r_L(A --> B, i, j)      = sum_{a,b} gx_L(A@a, i, j) W[a,b] x_{L-1}(B@b, i, j) / Z
    r_L(A --> w_i)          = sum_a gx_L(A@a, i, i+1) W[a] / Z

(summed over L they are Petrov & Klein's r(A --> B C, i, k, j) etc.).

* ``max-rule-sum`` (Petrov & Klein 2007, §3, "max-rule-sum"): the base-label
  tree maximising the sum of the posteriors of its anchored rules, by a
  Viterbi DP over the items with the same unary layers:
  E_L(A, i, j) = max_{A --> B C, k} r_L + D_U(B, i, k) + D_U(C, k, j) (the
  lexical r_L at width 1), D_0 = E_0, D_L(A) = max(E_L(A), max_B r_L(A --> B)
  + D_{L-1}(B)), the answer D_U(ROOT, 0, n);
* ``max-rule-product`` (their best, "max-rule-product"): the same DP over
  log r_L (the product of the posteriors);
* ``viterbi``: the single best latent derivation (max-product over subtypes
  and trees, with the unary layers), its subtypes projected away.

Anchoring the bottom rule at its layer matters for max-rule-sum: scored by
its posterior summed over layers, a chain ``NP --> SBAR --> S --> NP`` of
tiny-posterior unaries above an NP would only add to the sum (the bottom
NP rule scores the same either way), and the DP inserts such label-level
cycles everywhere (labeled F1 40.6 instead of 64.1 with the H = 1 PTB-sample
grammar); anchored at layer 0 under the cycle, the bottom rule has a tiny
posterior too and the cycle loses.  Only anchored rules of positive
posterior are used, and each decoder is exact for its objective over the
items left by pruning.  Binary rules are indexed by (left child, right
child), so a split visits only rules whose two children are items of the
two child cells.

The kernel is csrc/latent_parse.pyx: one nogil loop over a batch of sentences
(coarse pass, pruning, fine pass, retry, decoding), all buffers allocated per
call, so that calls may run in threads.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.sparse import coo_matrix

from grind import log
from grind.errors import NumericalError, raise_if_out_of_memory
from grind.grammars.latent import BINARY, LEXICAL, UNARY, LatentGrammar

try:
    from grind.kernels import _latent_parse
except ImportError as e:              # pragma: no cover - unbuilt checkout
    raise_if_out_of_memory(e, "grind.kernels._latent_parse")
    _latent_parse = None
    _IMPORT_ERROR = e

#: Decoding methods of :meth:`LatentParser.parse`.
METHODS = {"max-rule-sum": 1, "max-rule-product": 2, "viterbi": 3}
#: The most unary layers per span the parser runs; with a unary cycle at least DEFAULT_UNARY.
MAX_UNARY, DEFAULT_UNARY = 30, 3


class Parse(NamedTuple):
    """One sentence's result: ``tree`` (nested tuples over base labels, the
    sentence's tokens as leaves, still binarised; None on failure), ``score``
    (the decoder's objective: the sum of the tree's anchored rule posteriors,
    the log of their product, or the best derivation's log probability; -inf
    on failure), ``logz`` (log Z of the fine chart that was decoded, pruned or
    not; -inf for Viterbi and failures) and ``reason`` (None, or why there is
    no tree)."""

    tree: tuple | None
    score: float
    logz: float
    reason: str | None


def project(latent: LatentGrammar, buffer, max_iter: int = 2000, tol: float = 1e-12):
    """The projection of a latent grammar onto its base symbols (module
    docstring): ``(coarse, c)`` with ``coarse`` one weight per base rule and
    ``c`` the expected subtype frequencies, subtypes of base symbol A at
    ``c[soff[A]:soff[A] + nsub[A]]`` (``soff`` the cumulative ``nsub``)."""
    lg = latent
    w = np.asarray(buffer, dtype=np.float64)
    ns = lg.nsub
    soff = np.concatenate([[0], np.cumsum(ns)[:-1]]).astype(np.int64)
    T = int(ns.sum())
    rule = np.repeat(np.arange(len(lg.kind)), lg.size)
    local = np.arange(lg.n_entries) - lg.offset[rule]
    kind, A = lg.kind[rule], lg.parent[rule]
    hb = np.where(lg.kind != LEXICAL, ns[np.where(lg.kind != LEXICAL, lg.left, 0)], 1)[rule]
    hc = np.where(lg.kind == BINARY, ns[np.where(lg.kind == BINARY, lg.right, 0)], 1)[rule]
    a = local // (hb * hc)
    b = (local // hc) % hb
    c = local % hc
    row = soff[A] + a
    rows, cols, vals = [], [], []
    kid = kind != LEXICAL
    rows.append(row[kid])
    cols.append(soff[lg.left[rule[kid]]] + b[kid])
    vals.append(w[kid])
    two = kind == BINARY
    rows.append(row[two])
    cols.append(soff[lg.right[rule[two]]] + c[two])
    vals.append(w[two])
    M = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(T, T)).tocsr()
    Mt = M.T.tocsr()
    e = np.zeros(T)
    e[soff[lg.root]] = 1.0
    cnt = e.copy()
    for _ in range(max_iter):
        new = e + Mt @ cnt
        if not np.all(np.isfinite(new)) or new.max() > 1e150:
            cnt = np.ones(T)
            break
        done = np.max(np.abs(new - cnt)) <= tol * new.max()
        cnt = new
        if done:
            break
    tot = np.bincount(np.repeat(np.arange(len(ns)), ns), weights=cnt, minlength=len(ns))
    num = np.bincount(rule, weights=cnt[row] * w, minlength=len(lg.kind))
    plain = np.bincount(rule, weights=w, minlength=len(lg.kind)) / ns[lg.parent]
    den = tot[lg.parent]
    coarse = np.where(den > 0, num / np.where(den > 0, den, 1.0), plain)
    return coarse, cnt


def _tables(lg: LatentGrammar, nsub, offset, buffer) -> dict:
    """The kernel's arrays for the base rules of ``lg`` with ``nsub`` subtypes per
    base symbol, rule blocks at ``offset`` of the float64 ``buffer``."""
    S = len(lg.bases)
    ns = np.asarray(nsub, dtype=np.int64)
    kind, par, left, right = lg.kind, lg.parent, lg.left, lg.right
    offset = np.asarray(offset, dtype=np.int64)
    jb = np.flatnonzero(kind == BINARY)
    jb = jb[np.lexsort((par[jb], right[jb], left[jb]))]
    B, C, A = left[jb], right[jb], par[jb]
    key = B * S + C
    pkeys, first = np.unique(key, return_index=True)
    pair_of = np.full(S * S, -1, dtype=np.intc)
    pair_of[pkeys] = np.arange(len(pkeys))
    pair_b, pair_c = pkeys // S, pkeys % S
    psize = ns[pair_b] * ns[pair_c]
    rsize = ns[B] * ns[C]
    ju = np.flatnonzero(kind == UNARY)
    ju = ju[np.lexsort((left[ju], par[ju]))]
    jl = np.flatnonzero(kind == LEXICAL)
    jl = jl[np.lexsort((par[jl], left[jl]))]

    def ic(x):
        return np.ascontiguousarray(x, dtype=np.intc)

    def i64(x):
        return np.ascontiguousarray(x, dtype=np.int64)

    def cum(x):
        return ic(np.concatenate([[0], np.cumsum(x)[:-1]]) if len(x) else np.zeros(0))

    return {
        "S": S, "T": int(ns.sum()), "root": int(lg.root), "maxsub": int(ns.max(initial=1)),
        "nun": len(ju), "npair": len(pkeys), "nbin": len(jb),
        "mtotal": int(psize.sum()), "gtotal": int(rsize.sum()),
        "nsub": ic(ns), "soff": cum(ns), "w": np.ascontiguousarray(buffer, dtype=np.float64),
        "pair_of": pair_of, "pair_b": ic(pair_b), "pair_c": ic(pair_c), "pair_moff": cum(psize),
        "left_ptr": ic(np.searchsorted(pair_b, np.arange(S + 1))),
        "prule_ptr": ic(np.append(first, len(jb))),
        "bin_par": ic(A), "bin_b": ic(B), "bin_c": ic(C), "bin_off": i64(offset[jb]), "bin_goff": cum(rsize),
        "un_ptr": ic(np.searchsorted(par[ju], np.arange(S + 1))), "un_par": ic(par[ju]),
        "un_child": ic(left[ju]), "un_off": i64(offset[ju]),
        "lex_ptr": ic(np.searchsorted(left[jl], np.arange(len(lg.words) + 1))), "lex_par": ic(par[jl]),
        "lex_off": i64(offset[jl]),
    }


#: With unary cycles, layers are added until the chains they leave out weigh at most this, relative.
UNARY_TAIL = 1e-13


def unary_layers(lg: LatentGrammar, buffer, least: int) -> tuple[int, float]:
    """Unary layers U for a grammar whose unary rules form a cycle, which the layers cut: the
    smallest U >= ``least`` (at most :data:`MAX_UNARY`) at which the chains of more than U unary
    rules weigh at most :data:`UNARY_TAIL` of the chains kept, for every subtype, measured from a
    start of one on every subtype: (v_m = Un^m 1; tail = sum_{m > U} v_m, its geometric rest
    extrapolated from the last ratio, against 1 + sum_{1 <= m <= U} v_m).  Returns (U, that
    relative tail at U; inf when the unary weights do not decay: their sum diverges)."""
    soff = np.concatenate([[0], np.cumsum(lg.nsub)]).astype(np.int64)
    total = int(soff[-1])
    rules = [(int(j), int(lg.parent[j]), int(lg.left[j])) for j in np.flatnonzero(lg.kind == UNARY)]
    blocks = [buffer[lg.offset[j]:lg.offset[j] + lg.size[j]].reshape(lg.nsub[a], lg.nsub[b]) for j, a, b in rules]
    v, terms = np.ones(total), []
    for _ in range(MAX_UNARY + 10):
        nv = np.zeros(total)
        for (_, a, b), blk in zip(rules, blocks):
            nv[soff[a]:soff[a + 1]] += blk @ v[soff[b]:soff[b + 1]]
        v = nv
        terms.append(v)
    last, prev = terms[-1].max(), terms[-2].max()
    r = last / prev if prev > 0 else 0.0
    rest = terms[-1] * (r / (1 - r)) if r < 1 else np.where(terms[-1] > 0, np.inf, 0.0)
    kept, tail = np.ones(total), sum(terms) + rest
    for u in range(1, MAX_UNARY + 1):
        kept = kept + terms[u - 1]
        tail = tail - terms[u - 1]
        if u >= least:
            rel = float(np.max(np.maximum(tail, 0.0) / kept))
            if rel <= UNARY_TAIL or u == MAX_UNARY:
                return u, rel
    return MAX_UNARY, float("inf")


class LatentParser:
    """Parse tokenised sentences with a latent-annotation grammar (module docstring).

    ``grammar``: a :class:`~grind.grammars.grammar.Grammar` over latent
    symbols (its ``weights`` are used unless ``weights`` is given: one per
    rule); ``latent``: its :class:`LatentGrammar` when already compiled.
    ``prune``: coarse-to-fine pruning at posterior ``threshold``;
    ``max_unary``: unary layers per span (default: the grammar's longest unary chain, so that the
    scores are exact; when its unary base rules form a cycle, which the sum cuts, as many as
    :func:`unary_layers` finds the cycles' weight needs (chains past them < :data:`UNARY_TAIL`,
    relative), at least the longest chain without the cycle-closing rules and :data:`DEFAULT_UNARY`,
    at most :data:`MAX_UNARY`: beyond it a warning says how much the scores are low).

    Attributes: ``latent``, ``buffer`` (the fine block weights), ``coarse``
    (the projected weight of every base rule), ``subtype_counts`` (the
    projection's expected subtype frequencies), and after each :meth:`parse`
    ``stats``: ``sentences``, ``items`` (the items (span, base symbol) of
    the coarse charts: non-zero inside score; sentences parsed with pruning
    only), ``pruned`` (of them removed: posterior below ``threshold``,
    including those of posterior 0, on no complete tree), ``pruned_share``
    (pruned / items), ``retries`` (sentences
    parsed again without pruning), ``failures`` (sentences without a tree).
    """

    def __init__(self, grammar, *, prune: bool = True, threshold: float = 1e-4, max_unary: int | None = None,
                 weights=None, latent: LatentGrammar | None = None):
        if _latent_parse is None:
            raise ImportError(f"grind.kernels._latent_parse is not built ({_IMPORT_ERROR}); run "
                              "`GRIND_KERNELS=latent_parse python setup.py build_ext --inplace`")
        if not threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {threshold}")
        self.grammar = grammar
        self.latent = lg = LatentGrammar(grammar) if latent is None else latent
        if int(lg.nsub.max(initial=1)) > 4095:
            raise ValueError("at most 4095 subtypes per symbol")
        w = np.asarray(grammar.weights if weights is None else weights, dtype=np.float64)
        if w.shape != (len(grammar),):
            raise ValueError(f"expected {len(grammar)} weights, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise NumericalError("rule weights must be finite and non-negative")
        self.buffer = lg.gather(w)
        #: With unary cycles: the chains the layers leave out, relative (:func:`unary_layers`); 0 without.
        self.unary_tail = 0.0
        if max_unary is None:
            longest, cyclic = lg.longest_unary_chain()
            max_unary = longest
            if cyclic:
                max_unary, self.unary_tail = unary_layers(lg, self.buffer, max(DEFAULT_UNARY, longest))
                if self.unary_tail > UNARY_TAIL:
                    log.warn(f"the grammar's unary rules form cycles heavy enough that chains of more than "
                             f"{max_unary} unary rules (the most a span takes) still weigh {self.unary_tail:.2g} of "
                             "the rest: inside scores and log-likelihoods are low by up to that much, relative")
        if not 0 <= max_unary <= MAX_UNARY:
            raise ValueError(f"max_unary must be in 0..{MAX_UNARY}, got {max_unary}")
        self.prune, self.threshold, self.max_unary = bool(prune), float(threshold), int(max_unary)
        self.coarse, self.subtype_counts = project(lg, self.buffer)
        self._fine = _tables(lg, lg.nsub, lg.offset, self.buffer)
        self._coarse = _tables(lg, np.ones(len(lg.bases), dtype=np.int64), np.arange(len(lg.kind)), self.coarse)
        self.stats: dict = {}

    def parse(self, sentences, method: str = "max-rule-sum") -> list[Parse]:
        """One :class:`Parse` per sentence (a list of grammar terminals)."""
        if method not in METHODS:
            raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
        sents = [list(s) for s in sentences]
        res = self._run(sents, METHODS[method], self.prune)
        out: list[Parse] = []
        labels = self.latent.bases
        for q, sent in enumerate(sents):
            why, score, logz, rows = res[q]
            tree = None if rows is None else _tree(rows, sent, labels)
            out.append(Parse(tree, score, logz, why))
        return out

    def logz(self, sentences, grammar: str = "fine") -> np.ndarray:
        """log Z of every sentence, exhaustive (no pruning), under the fine grammar
        or (``grammar="coarse"``) its projection; -inf where none."""
        if grammar not in ("fine", "coarse"):
            raise ValueError(f"grammar must be 'fine' or 'coarse', got {grammar!r}")
        res = self._run([list(s) for s in sentences], 0, False, coarse=grammar == "coarse")
        return np.array([r[2] for r in res])

    def _run(self, sents, method, prune, coarse=False):
        """(reason, score, logz, rows) per sentence; sets ``stats``."""
        wid = self.latent.word_id
        U = self.max_unary
        ids, offs, why = [], [0], {}
        for q, sent in enumerate(sents):
            if not sent:
                why[q] = "empty sentence"
            for p, tok in enumerate(sent):
                if tok not in wid:
                    why[q] = f"token {tok!r} at position {p + 1} is not a terminal of the grammar"
                    break
            if q not in why:
                ids.extend(wid[t] for t in sent)
            offs.append(len(ids))
        words = np.array(ids, dtype=np.intc)
        offs_a = np.array(offs, dtype=np.int64)
        lens = np.diff(offs_a)
        Q = len(sents)
        row_off = np.concatenate([[0], np.cumsum((2 * lens - 1).clip(0) * (U + 1))]).astype(np.int64)
        rows = np.zeros((max(1, int(row_off[-1])), 4), dtype=np.intc)
        score, logz = np.full(Q, -np.inf), np.full(Q, -np.inf)
        info = np.zeros((Q, 3), dtype=np.int64)
        nrows = np.full(Q, -1, dtype=np.int64)
        fine = self._coarse if coarse else self._fine
        _latent_parse.run(fine, self._coarse, words, offs_a, U, method, prune, self.threshold,
                          score, logz, info, rows, row_off, nrows)
        out = []
        for q in range(Q):
            if q in why:
                out.append((why[q], -np.inf, -np.inf, None))
            elif method == 0:
                out.append((None, float(logz[q]), float(logz[q]), None))
            elif nrows[q] >= 0:
                out.append((None, float(score[q]), float(logz[q]), rows[row_off[q]:row_off[q] + nrows[q]]))
            else:
                out.append(("no parse", -np.inf, float(logz[q]), None))
        if method:
            items, pruned = int(info[:, 0].sum()), int(info[:, 1].sum())
            self.stats = {"sentences": Q, "items": items, "pruned": pruned,
                          "pruned_share": pruned / items if items else 0.0,
                          "retries": int(info[:, 2].sum()), "failures": sum(1 for r in out if r[3] is None)}
        return out


def _tree(rows, sent, labels):
    """The nested-tuple tree of pre-order rows (symbol, i, j, children)."""
    stack: list[list] = []
    root = None
    for a, i, _, kids in rows:
        if kids == 0:
            node: tuple | list = (labels[a], sent[i])
        else:
            stack.append([labels[a], kids])
            continue
        while True:
            if not stack:
                root = node
                break
            top = stack[-1]
            top.append(node)
            if len(top) - 2 < top[1]:
                break
            stack.pop()
            node = (top[0], *top[2:])
    return root
