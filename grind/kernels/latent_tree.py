"""Training a latent-annotation PCFG on gold trees: inside-outside over the
hidden subtypes of every node (Matsuzaki et al. 2005; Petrov et al. 2006;
Wang & Blunsom 2013, §4.3).

The grammar is over latent symbols ``X@k`` (:mod:`grind.grammars.latent`),
compiled once by :class:`~grind.grammars.latent.LatentGrammar` into base rules
r with dense subtype blocks W_r.  A "sentence" is a prepared gold tree
(:func:`grind.formats.treebank.prepare`: binarised, words mapped); its
derivations are the assignments of a subtype to each of its nodes, node n's
base rule r(n) fixed by the tree.  For nodes n in post-order, with H_X the
subtypes of node n's symbol, the inside vector over them is

* lexical ``A --> w``:   beta_n[a] = W[a]
* unary   ``A --> B``:   beta_n[a] = sum_b W[a,b] beta_child[b]
* binary  ``A --> B C``: beta_n[a] = sum_{b,c} W[a,b,c] beta_left[b] beta_right[c]

and Z = beta_root[0] (the root is unsplit).  The outside vectors run top down
from alpha_root = 1:

* unary:  alpha_child[b] = sum_a alpha_n[a] W[a,b]
* binary: alpha_left[b]  = sum_{a,c} alpha_n[a] W[a,b,c] beta_right[c],
          alpha_right[c] = sum_{a,b} alpha_n[a] W[a,b,c] beta_left[b]

and the expected count of block entry (a,b,c) at node n is
alpha_n[a] W[a,b,c] beta_left[b] beta_right[c] / Z (lexical: alpha_n[a] W[a] / Z;
unary: alpha_n[a] W[a,b] beta_child[b] / Z), summed over the nodes of the
trees into one buffer of ``LatentGrammar.n_entries`` entries and scattered to
the grammar's rules.  That is E[f_r] = w_r d log Z / d w_r for every rule, so
the counts and log Z follow the :class:`~grind.kernels.contract.ChartParser`
contract; the cost is O(H^3) per binary node.

Scaling: every inside and outside vector is stored divided by its maximum,
and the log of the true scale is kept per node (log beta_n = log beta~_n +
lb_n with lb_n = log max + lb of the children; alpha likewise, la_left =
la_n + lb_right + log max), so log Z = log beta~_root[0] + lb_root and each
count is alpha~ W beta~ beta~ * exp(la_n + lb_left + lb_right - log Z): no
underflow on 100-word trees at H = 16.  A tree whose Z is 0 (some node has an
all-zero inside vector) gets log Z = -inf and no counts.

Viterbi is the same recursion with max for sum (and back pointers, the first
maximum on ties), decoded top down; sampling draws the root's subtype, then
each node's children's subtypes (b, c) with probability proportional to
W[a,b,c] beta_left[b] beta_right[c] given the node's subtype a, top down: an
exact draw from P(assignment | tree, weights).  Both return derivations in the
contract's format: pre-order rows ``(grammar rule, start, end)``, one per node.

The kernel is csrc/latent_tree.pyx: one nogil loop over the requested trees,
work buffers allocated per call (calls may run in threads, as
:class:`grind.infer.training.ShardedEstep` runs them).  When the grammar's
rules are exactly the block entries in order (as :func:`split_grammar` makes
them) the weights are the buffer and the buffer is the counts; otherwise
:meth:`LatentGrammar.gather` / :meth:`LatentGrammar.scatter` map between them.
"""
from __future__ import annotations

import numpy as np

from grind.errors import NumericalError, raise_if_out_of_memory
from grind.formats.trees import leaves
from grind.grammars.latent import BINARY, LEXICAL, LatentGrammar
from grind.kernels.contract import ChartParser

try:
    from grind.kernels import _latent_tree
except ImportError as e:              # pragma: no cover - unbuilt checkout
    raise_if_out_of_memory(e, "grind.kernels._latent_tree")
    _latent_tree = None
    _IMPORT_ERROR = e


class TreeParser(ChartParser):
    """A latent-symbol grammar compiled for a corpus of prepared gold trees.

    ``grammar``: a :class:`~grind.grammars.grammar.Grammar` over latent symbols
    (e.g. :func:`grind.grammars.latent.split_grammar`); ``trees``: prepared
    trees (binarised, words mapped); ``latent``: the grammar's
    :class:`LatentGrammar` when already compiled (it is compiled otherwise).

    Attributes: ``grammar``, ``latent``, ``trees``, ``sentences`` (each tree's
    words), ``failures`` (tree index -> why it can never be scored: a rule the
    grammar lacks, a root that is not the start symbol), ``node_rule``,
    ``node_left``, ``node_right`` (int64, every encoded tree's nodes in
    post-order concatenated: base rule, child node indices local to the tree,
    -1 where absent), ``tree_offset`` (int64, n_trees + 1: tree s's nodes are
    ``tree_offset[s]:tree_offset[s + 1]``, none for a failure), ``n_nodes``.
    """

    def __init__(self, grammar, trees, latent: LatentGrammar | None = None):
        if _latent_tree is None:
            raise ImportError(f"grind.kernels._latent_tree is not built ({_IMPORT_ERROR}); run "
                              "`GRIND_KERNELS=latent_tree python setup.py build_ext --inplace`")
        self.grammar = grammar
        self.latent = lg = LatentGrammar(grammar) if latent is None else latent
        if lg.grammar is not grammar and lg.grammar.rules != grammar.rules:
            raise ValueError("latent was compiled from another grammar")
        self.trees = list(trees)
        self.sentences = [[] if isinstance(t, str) else leaves(t) for t in self.trees]
        self.failures: dict[int, str] = {}
        parts, sizes = [], np.zeros(len(self.trees), dtype=np.int64)
        for s, tree in enumerate(self.trees):
            if isinstance(tree, str) or not tree:
                self.failures[s] = "not a tree"
                continue
            if tree[0] != grammar.start:
                self.failures[s] = f"the root {tree[0]} is not the start symbol {grammar.start}"
                continue
            enc, why = lg.encode(tree)
            if enc is None:
                self.failures[s] = why
                continue
            parts.append(enc)
            sizes[s] = len(enc[0])
        self.n_nodes = sizes
        self.tree_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        def cat(k):
            return np.ascontiguousarray(np.concatenate([p[k] for p in parts]) if parts
                                        else np.zeros(0, dtype=np.int64), dtype=np.int64)

        self.node_rule, self.node_left, self.node_right = cat(0), cat(1), cat(2)
        ns = lg.nsub
        ha = ns[lg.parent]
        hb = np.ones(len(lg.kind), dtype=np.int64)
        hc = np.ones(len(lg.kind), dtype=np.int64)
        sym, two = lg.kind != LEXICAL, lg.kind == BINARY     # (``left`` is a word id for a lexical rule)
        hb[sym] = ns[lg.left[sym]]
        hc[two] = ns[lg.right[two]]
        node_h = ha[self.node_rule]
        cum = np.concatenate([[0], np.cumsum(node_h)])
        vsize = cum[self.tree_offset[1:]] - cum[self.tree_offset[:-1]]
        n = len(grammar)
        self._identity = lg.n_entries == n and bool(np.array_equal(lg.rule_of_entry, np.arange(n)))
        self._kernel = _latent_tree.Kernel({
            "kind": _i64(lg.kind), "offset": _i64(lg.offset), "ha": _i64(ha), "hb": _i64(hb), "hc": _i64(hc),
            "rule_of_entry": _i64(lg.rule_of_entry), "node_rule": self.node_rule, "node_left": self.node_left,
            "node_right": self.node_right, "tree_offset": self.tree_offset,
            "nmax": int(sizes.max(initial=0)), "vmax": int(vsize.max(initial=0)),
            "wmax": int(max((hb * hc).max(initial=1), ha.max(initial=1))),
        })

    # -- the ChartParser contract ------------------------------------------

    def inside_outside(self, weights, idx=None):
        """Expected rule counts and log Z of trees ``idx`` (see
        :class:`grind.kernels.contract.ChartParser`)."""
        idx = self._idx(idx)
        ok, run = self._runnable(idx)
        buf = self._buffer(weights)
        cnt = np.zeros(self.latent.n_entries)
        lz = np.empty(len(run))
        self._kernel.inside_outside(buf, run, cnt, lz)
        counts = cnt if self._identity else self.latent.scatter(cnt)
        logz = np.full(len(idx), -np.inf)
        logz[ok] = lz
        return counts, logz

    def viterbi(self, weights, idx=None):
        """Most probable subtype assignment of each tree and its log weight
        (None / -inf for failures and zero-weight trees)."""
        return self._decode(weights, idx, None)

    def sample(self, weights, rng, idx=None):
        """One subtype assignment per tree from P(assignment | tree, weights);
        one seed per requested tree is drawn from ``rng`` in order, so results
        are reproducible given ``rng``."""
        return self._decode(weights, idx, rng)[0]

    def sparse_counts(self, weights, i: int):
        """Tree ``i``'s expected counts as ``(rule indices, values)`` over the
        blocks its nodes use, and its log Z: what :meth:`inside_outside` gives
        for ``idx=[i]`` without a vector over the whole grammar (for
        collapsed VB, one tree at a time; not for concurrent calls).  Only
        the used blocks' weights are checked."""
        if i in self.failures:
            return _NO_RULES, _NO_VALUES, -np.inf
        blocks = self._blocks_of(i)
        ent = _ranges(self.latent.offset[blocks], self.latent.size[blocks])
        w = self._weight_vector(weights, check=False)            # the used blocks' weights are checked below
        if self._identity:
            used = w[ent]
            buf = np.ascontiguousarray(w)
        else:
            buf = self.latent.gather(w)
            used = buf[ent]
        if used.size and not (used.min() >= 0 and np.isfinite(used.max())):
            raise NumericalError("rule weights must be finite and non-negative")
        if getattr(self, "_cnt", None) is None:
            self._cnt = np.zeros(self.latent.n_entries)
        lz = np.empty(1)
        self._kernel.inside_outside(buf, np.array([i], dtype=np.int64), self._cnt, lz)
        vals = self._cnt[ent]
        self._cnt[ent] = 0.0
        if self._identity:
            return ent, vals, float(lz[0])
        rules = self.latent.rule_of_entry[ent]
        keep = rules >= 0
        order = np.argsort(rules[keep], kind="stable")
        return rules[keep][order], vals[keep][order], float(lz[0])

    def local_rules(self, i: int) -> np.ndarray:
        """The grammar rules tree ``i``'s E-step reads: every refinement of the
        base rules its nodes use (empty for a failure)."""
        if i in self.failures:
            return _NO_RULES
        blocks = self._blocks_of(i)
        ent = _ranges(self.latent.offset[blocks], self.latent.size[blocks])
        if self._identity:
            return ent
        rules = self.latent.rule_of_entry[ent]
        return rules[rules >= 0]

    # -- internals -----------------------------------------------------------

    def _blocks_of(self, i):
        if getattr(self, "_tree_blocks", None) is None:
            self._tree_blocks = {}
        b = self._tree_blocks.get(i)
        if b is None:
            b = self._tree_blocks[i] = np.unique(self.node_rule[self.tree_offset[i]:self.tree_offset[i + 1]])
        return b

    def _decode(self, weights, idx, rng):
        idx = self._idx(idx)
        seeds = None if rng is None else rng.integers(2**63, size=len(idx), dtype=np.int64).astype(np.uint64)
        ok, run = self._runnable(idx)
        buf = self._buffer(weights)
        row_off = np.concatenate([[0], np.cumsum(self.n_nodes[run])]).astype(np.int64)
        rows = np.empty((max(1, int(row_off[-1])), 3), dtype=np.int64)
        n_rows = np.empty(len(run), dtype=np.int64)
        score = np.empty(len(run))
        use = np.zeros(0, dtype=np.uint64) if seeds is None else np.ascontiguousarray(seeds[ok])
        self._kernel.decode(buf, run, use, rng is None, rows, row_off, n_rows, score)
        out: list = [None] * len(idx)
        for q, pos in enumerate(np.flatnonzero(ok)):
            if n_rows[q] >= 0:
                out[pos] = rows[row_off[q]:row_off[q] + n_rows[q]].copy()
        logp = np.full(len(idx), -np.inf)
        logp[ok] = score
        return out, logp

    def _runnable(self, idx):
        if idx.size and (idx.min() < 0 or idx.max() >= len(self.trees)):
            raise IndexError(f"tree index out of range 0..{len(self.trees) - 1}")
        failed = np.zeros(len(self.trees), dtype=bool)
        failed[np.fromiter(self.failures, dtype=np.int64, count=len(self.failures))] = True
        ok = ~failed[idx]
        return ok, np.ascontiguousarray(idx[ok], dtype=np.int64)

    def _buffer(self, weights):
        """The block-entry buffer of ``weights`` (the weights themselves when
        the grammar's rules are the entries in order)."""
        w = self._weight_vector(weights)
        return w if self._identity else self.latent.gather(w)


_NO_RULES, _NO_VALUES = np.zeros(0, np.int64), np.zeros(0)


def _ranges(starts, lengths):
    """Concatenation of arange(s, s + l) for each (s, l)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    ends = np.cumsum(lengths)
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lengths), lengths)
    return shift + np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)
