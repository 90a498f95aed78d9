"""Partition structures of the shared logistic normal (Cohen & Smith 2009,
"Shared logistic normal distributions for soft parameter tying"; Cohen &
Smith 2010, JMLR 11, §3.3, Definition 1).

Normal *experts* eta_j ~ N(mu_j, Sigma_j), j = 1..n, of dimension L_j.  The
coordinates of expert j are cut into segments, one per multinomial it covers;
the segment I_{j,k} of multinomial k has N_k coordinates, k's rules in order.
With J_k the experts that cover k, the multinomial is (Definition 1)

    eta~_k = (1 / |J_k|) sum_{j in J_k} eta_{j, I_{j,k}},    theta_k = softmax(eta~_k).

The plain logistic normal is the structure in which every multinomial has
exactly one expert, its own.  An expert that covers several multinomials
carries covariance *across* them (Sigma_j is full over all its segments):
that is the soft tying.

grind's structures (§5.3) keep every multinomial's own expert and add, for a
set of tag families, experts over the DMV multinomials of the family's heads h
(``--tie-what choose+stop``, the default): per direction one expert over the
*choose* multinomials choose(. | h, dir) (LHS L'_h, R'_h), and per direction
and valence one over the *stop* multinomials stop(. | h, dir, adj) (LHS L0_h,
L_h, R0_h, R_h); ``--tie-what choose`` ties the choose multinomials only (the
root multinomial is never tied):

    TieV    the heads of family ``verb``;
    TieN    the nominal heads (families ``noun`` and ``proper_noun`` together);
    TieV&N  both, as two families;
    TieA    every family (noun and proper_noun together, as in TieN).

Expert names: ``tie:F:left``, ``tie:F:right`` (choose) and
``tie:F:stop:left:0``, ``tie:F:stop:left:1``, ``tie:F:stop:right:0``,
``tie:F:stop:right:1`` (stop, valence 0 = no dependent yet on that side), F
the family (``nominal`` for TieN's).  Tag families: ``grind/data/families-*.txt``
(:func:`grind.grammars.families.read_families`).

Untied warm-up (``--tie-warmup N``, :class:`grind.infer.ln.LogisticNormal`): the first
N iterations train the plain logistic normal; then the tied structure takes
over from the current means (see ``LogisticNormal._switch``).

An expert that would cover a single multinomial ties nothing and is left out.
Bilingual tying (§5.4): the same experts over the multinomials of two
languages' grammars (:func:`joint_grammar`), so the families tie the languages
(an expert's segments: language 1's heads, then language 2's, each by tag).

Structure file (``--tie FILE``; ``grind make-structure`` writes one)::

    # comment
    expert NAME LHS [LHS ...]     an expert over these multinomials, concatenated in this order
    own yes|no                    every multinomial also has its own expert (default yes)

With ``own no`` every multinomial must be covered by some listed expert.
"""
from __future__ import annotations

import numpy as np

from grind import log
from grind.errors import InputError
from grind.grammars.families import read_families
from grind.grammars.grammar import Grammar
from grind.kernels.contract import ChartParser
from grind.formats.textio import header_lines, open_out, read_lines

#: --tie -> which families are tied, and into which expert ("nominal": nouns, common and proper).
NOMINAL = {"noun": "nominal", "proper_noun": "nominal"}
TIES = {"V": {"verb": "verb"}, "N": NOMINAL, "VN": {"verb": "verb", **NOMINAL}, "A": None}
TIE_NAMES = {"TieV": "V", "TieN": "N", "TieV&N": "VN", "TieA": "A"}


class Group:
    """Experts updated together: they cover disjoint multinomials.

    ``tgt[e, j]``: flat index ``k * D + i`` into the padded multinomial layout of
    coordinate j of expert e (-1: padding); ``kof``: its multinomial;
    ``w = 1 / |J_k|`` (1 in padding)."""

    def __init__(self, members, experts, pk, n_cover):
        self.members = list(members)
        dims = [sum(int(pk.sizes[k]) for k in experts[e][1]) for e in self.members]
        self.E, self.L = len(self.members), max(dims)
        self.tgt = np.full((self.E, self.L), -1, dtype=np.int64)
        self.kof = np.zeros((self.E, self.L), dtype=np.int64)
        for i, e in enumerate(self.members):
            pos = 0
            for k in experts[e][1]:
                d = int(pk.sizes[k])
                self.tgt[i, pos:pos + d] = k * pk.D + np.arange(d)
                self.kof[i, pos:pos + d] = k
                pos += d
        self.mask = self.tgt >= 0
        self.targets = self.tgt[self.mask]          # flat (K * D) position of each coordinate, in mask order
        #: coordinates of multinomials with >= 2 rules; the others (size-1 multinomials) are
        #: fixed at the prior (:mod:`grind.infer.ln`, "Size-1 multinomials")
        self.live = self.mask & (pk.sizes[self.kof] > 1)
        self.w = np.where(self.mask, 1.0 / n_cover[self.kof], 1.0)
        self.flat = np.where(self.mask, self.tgt, 0)

    def gather(self, x):
        """(..., K, D) multinomial layout -> (..., E, L) expert layout (0 in padding)."""
        flat = x.reshape(x.shape[:-2] + (-1,))
        return np.where(self.mask, flat[..., self.flat], 0.0)

    def gather_k(self, x):
        """(..., K) per multinomial -> (..., E, L): each coordinate gets its multinomial's value."""
        return np.where(self.mask, x[..., self.kof], 0.0)

    def scatter(self, y, shape):
        """(..., E, L) -> (..., K, D): each coordinate to its rule (targets are unique in a group)."""
        out = np.zeros(y.shape[:-2] + (shape[0] * shape[1],))
        out[..., self.targets] = y[..., self.mask]
        return out.reshape(y.shape[:-2] + tuple(shape))


class Structure:
    """The experts of a shared logistic normal over a :class:`grind.infer.ln.Packing`.

    ``experts``: list of ``(name, (k1, k2, ...))``; ``groups``: a greedy
    colouring into :class:`Group` s of experts with disjoint multinomials."""

    def __init__(self, pk, experts):
        self.pk = pk
        self.experts = [(str(n), tuple(int(k) for k in ks)) for n, ks in experts]
        names = [n for n, _ in self.experts]
        if len(set(names)) != len(names):
            raise InputError("two experts share a name")
        n_cover = np.zeros(pk.K, dtype=np.int64)
        for name, ks in self.experts:
            if not ks or len(set(ks)) != len(ks):
                raise InputError(f"expert {name} must cover distinct multinomials")
            n_cover[list(ks)] += 1
        if np.any(n_cover == 0):
            raise InputError(f"multinomial {pk.lhs[int(np.argmin(n_cover))]} is covered by no expert")
        self.n_cover = n_cover
        self.inv_n = np.where(pk.mask, 1.0 / n_cover[:, None], 0.0)
        dims = [sum(int(pk.sizes[k]) for k in ks) for _, ks in self.experts]
        self.groups = [Group(m, self.experts, pk, n_cover) for m in _colour(self.experts, dims)]

    @classmethod
    def plain(cls, pk):
        """One expert per multinomial: the logistic normal of §3."""
        return cls(pk, [(a, (k,)) for k, a in enumerate(pk.lhs)])

    @property
    def is_plain(self) -> bool:
        return bool(all(len(ks) == 1 for _, ks in self.experts) and np.all(self.n_cover == 1))

    def combine(self, xs, power=1):
        """sum over experts of their segments, times |J_k|^-power: with the
        means (power 1) the mean of eta~; with variances (power 2) its variance."""
        lead = xs[0].shape[:-2]
        out = np.zeros(lead + (self.pk.K * self.pk.D,))
        for gr, x in zip(self.groups, xs):         # targets are unique within a group
            out[..., gr.targets] += x[..., gr.mask]
        out = out.reshape(lead + (self.pk.K, self.pk.D))
        out *= self.inv_n ** power
        return out

    def add(self, total, gi, delta, power=1):
        """In place: ``total`` (..., K, D) += group ``gi``'s ``delta`` (..., E, L)
        times |J_k|^-power -- :meth:`combine` after one group changed."""
        gr = self.groups[gi]
        flat = total.reshape(total.shape[:-2] + (-1,))
        flat[..., gr.targets] += (delta * gr.w ** power)[..., gr.mask]
        return total

    def describe(self) -> str:
        shared = sum(1 for _, ks in self.experts if len(ks) > 1)
        return f"{len(self.experts)} experts ({shared} shared) in {len(self.groups)} groups"


def _colour(experts, dims):
    """First-fit colouring among experts of one dimension: an expert joins the
    first group of its dimension none of whose experts covers one of its
    multinomials.  One dimension a group keeps padding (and the batched
    Newton solves, cubic in it) small: a DMV's 2-rule stop multinomials are
    not padded to the size of its choose multinomials."""
    groups, covered, dim = [], [], []
    for e, (_, ks) in enumerate(experts):
        for g, cov, d in zip(groups, covered, dim):
            if d == dims[e] and cov.isdisjoint(ks):
                g.append(e)
                cov.update(ks)
                break
        else:
            groups.append([e])
            covered.append(set(ks))
            dim.append(dims[e])
    return groups


# ----------------------------------------------------------------------------- building structures

#: --tie-what: which DMV multinomials of a family's heads the built-in structures tie.
TIE_WHAT = ("choose+stop", "choose")
DEFAULT_TIE_WHAT = "choose+stop"


def dmv_multinomials(grammar) -> dict:
    """Multinomial LHS -> (language prefix, kind, direction, valence, head tag)
    for the choose multinomials L'_h / R'_h (kind ``choose``, valence None) and
    the stop multinomials L0_h, L_h, R0_h, R_h (kind ``stop``, valence 0 before
    the first dependent on that side, 1 after; :func:`grind.grammars.dmv.head_rules`) of
    a DMV grammar or of a :func:`joint_grammar` of DMV grammars."""
    from grind.grammars.dmv import parse_symbol
    out = {}
    for a in grammar.nonterminals:
        lang, sym = (a.split(JOINT_SEP, 1) if JOINT_SEP in a else ("", a))
        p = parse_symbol(sym)
        if p is None or p[0][0] not in "LR":
            continue
        side = "left" if p[0][0] == "L" else "right"
        if p[0][1] == "'":
            out[a] = (lang, "choose", side, None, p[1])
        else:
            out[a] = (lang, "stop", side, 0 if p[0][1] == "0" else 1, p[1])
    return out


def choose_heads(grammar) -> dict:
    """Multinomial LHS -> (language prefix, direction, head tag) for the choose
    multinomials L'_h (left) and R'_h (right) of a DMV grammar or of a
    :func:`joint_grammar` of DMV grammars."""
    return {a: (lang, side, h) for a, (lang, kind, side, _, h) in dmv_multinomials(grammar).items()
            if kind == "choose"}


def tie_structure(grammar, pk, tie: str, families, what: str = DEFAULT_TIE_WHAT) -> Structure:
    """TieV / TieN / TieV&N / TieA (``tie`` = V, N, VN, A or a paper name) over
    a DMV grammar, families from a mapping ``{tag: family}``; own experts kept.

    For every tied family F (``verb``; ``nominal`` = noun + proper_noun; TieA:
    every family) one expert per direction over the choose multinomials of F's
    heads, ``tie:F:left`` / ``tie:F:right``; with ``what="choose+stop"`` (the
    default) also one expert per direction and valence over their stop
    multinomials, ``tie:F:stop:left:0`` (L0_h), ``tie:F:stop:left:1`` (L_h),
    ``tie:F:stop:right:0`` (R0_h), ``tie:F:stop:right:1`` (R_h).  Segments are
    ordered by language, then head tag.  For a joint grammar the experts span
    both languages."""
    tie = TIE_NAMES.get(tie, tie)
    if tie not in TIES:
        raise InputError(f"unknown tying {tie!r} (V, N, VN, A, or a structure file)")
    if what not in TIE_WHAT:
        raise InputError(f"unknown --tie-what {what!r} ({', '.join(TIE_WHAT)})")
    heads = dmv_multinomials(grammar)
    if not any(v[1] == "choose" for v in heads.values()):
        raise InputError("--tie V/N/VN/A ties the choose and stop multinomials of a DMV grammar; "
                         "for other grammars write a structure file")
    langs = {a.split(JOINT_SEP, 1)[0] for a in grammar.nonterminals} if JOINT_SEP in grammar.start else set()
    with_choose = {v[0] for v in heads.values() if v[1] == "choose"}
    for name in sorted(langs):
        if name not in with_choose:
            raise InputError(f"--tie V/N/VN/A ties DMV grammars, but the joint grammar's {name!r} is not one "
                             "(no choose multinomial): for other grammars write a structure file")
    want = TIES[tie]
    key = (lambda f: want.get(f)) if want is not None else (lambda f: NOMINAL.get(f, f))   # noqa: E731
    kidx = {a: k for k, a in enumerate(pk.lhs)}
    buckets = {}
    for a in sorted(heads, key=lambda a: (heads[a][0], heads[a][4])):
        lang, kind, side, val, h = heads[a]
        f = key(families.get(h))
        if f is None or (kind == "stop" and what == "choose"):
            continue
        name = f"tie:{f}:{side}" if kind == "choose" else f"tie:{f}:stop:{side}:{val}"
        buckets.setdefault(name, []).append(kidx[a])
    shared = [(name, tuple(ks)) for name, ks in sorted(buckets.items()) if len(ks) > 1]
    if not shared:
        tied = "every family" if want is None else "the family " + " and ".join(sorted(set(want.values())))
        log.warn(f"--tie {tie} ties {tied}, but no such family has two heads in this grammar under the tag-family "
                 "mapping given (--families): no expert covers two multinomials; this is the plain logistic normal")
    return Structure(pk, [(a, (k,)) for k, a in enumerate(pk.lhs)] + shared)


def read_structure(path: str, pk) -> Structure:
    """A structure file (module docstring) over ``pk``'s multinomials; errors name file:line."""
    kidx = {a: k for k, a in enumerate(pk.lhs)}
    listed, own, seen, names = [], True, False, {}
    for lineno, line in read_lines(path):
        s = line.split()
        if not s or s[0].startswith("#"):
            continue
        seen = True
        where = f"{path}:{lineno}"
        if s[0] == "own" and len(s) == 2 and s[1] in ("yes", "no"):
            own = s[1] == "yes"
        elif s[0] == "expert" and len(s) >= 3:
            unknown = [a for a in s[2:] if a not in kidx]
            if unknown:
                raise InputError(f"{where}: {unknown[0]!r} is not a left-hand side of the grammar")
            if s[1] in names:
                raise InputError(f"{where}: expert {s[1]} is already defined at line {names[s[1]]}")
            names[s[1]] = lineno
            listed.append((s[1], tuple(kidx[a] for a in s[2:])))
        else:
            raise InputError(f"{where}: expected 'expert NAME LHS...' or 'own yes|no', got {line.strip()!r}")
    if not seen:
        raise InputError(f"{path}: no 'own yes|no' or 'expert NAME LHS...' lines (an empty structure file)")
    experts = ([(a, (k,)) for k, a in enumerate(pk.lhs)] if own else []) + listed
    try:
        return Structure(pk, experts)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def write_structure(path: str, st: Structure, **header) -> None:
    """The shared experts of ``st`` as a structure file (own experts implied by ``own yes``)."""
    pk = st.pk
    own = {(a, (k,)) for k, a in enumerate(pk.lhs)}
    with open_out(path) as f:
        f.writelines(header_lines(**header))
        f.write(f"# {st.describe()}\n")
        f.write("own " + ("yes" if own <= set(st.experts) else "no") + "\n")
        for name, ks in st.experts:
            if (name, ks) not in own:
                f.write(f"expert {name} " + " ".join(pk.lhs[k] for k in ks) + "\n")


def make_structure(grammar, pk, tie, families, what: str = DEFAULT_TIE_WHAT) -> Structure:
    """``None`` -> plain; V/N/VN/A (or TieV, ...) -> :func:`tie_structure`
    (``what``: ``choose+stop`` or ``choose``); else a structure file."""
    if not tie:
        return Structure.plain(pk)
    if tie in TIES or tie in TIE_NAMES:
        fam = read_families(families) if isinstance(families, str) else dict(families or {})
        return tie_structure(grammar, pk, tie, fam, what)
    return read_structure(tie, pk)


# ----------------------------------------------------------------------------- two languages

JOINT_SEP = "|"


def joint_grammar(grammars, names) -> Grammar:
    """One grammar holding several languages' grammars side by side: every
    symbol of grammar i is prefixed ``names[i] + "|"``; rules keep their order,
    grammar after grammar (so rule r of grammar i is rule offset_i + r).
    The start symbol is the first grammar's; the others' are reached only by
    their own sentences (see :class:`JointParser`)."""
    rules, weights = [], []
    for g, n in zip(grammars, names):
        p = n + JOINT_SEP
        rules += [(p + lhs, tuple(p + s for s in rhs)) for lhs, rhs in g.rules]
        weights.append(np.asarray(g.weights, dtype=np.float64))
    return Grammar(rules, np.concatenate(weights), names[0] + JOINT_SEP + grammars[0].start)


def split_joint(grammar):
    """A :func:`joint_grammar` -> its languages' grammars (prefixes removed), in
    order; ``None`` for any other grammar."""
    if JOINT_SEP not in grammar.start:
        return None
    parts = {}
    for (lhs, rhs), w in zip(grammar.rules, grammar.weights):
        name, a = lhs.split(JOINT_SEP, 1)
        cut = len(name) + 1
        rules, ws = parts.setdefault(name, ([], []))
        rules.append((a, tuple(s[cut:] for s in rhs)))
        ws.append(w)
    start = grammar.start.split(JOINT_SEP, 1)[1]
    return [Grammar(r, np.array(w), start) for r, w in parts.values()]


class JointParser(ChartParser):
    """The :class:`grind.kernels.contract.ChartParser` contract over a joint grammar:
    sentence i of the concatenated corpus is parsed by its language's parser
    with that language's slice of the weights; counts land in that slice."""

    def __init__(self, grammar, parsers):
        self.grammar, self.parsers = grammar, list(parsers)
        self.rule_off = np.cumsum([0] + [len(p.grammar) for p in self.parsers])
        self.sent_off = np.cumsum([0] + [len(p.sentences) for p in self.parsers])
        self.sentences = [s for p in self.parsers for s in p.sentences]
        self.failures = {int(o) + i: why for p, o in zip(self.parsers, self.sent_off) for i, why in p.failures.items()}

    def _split(self, idx):
        idx = self._idx(idx)
        lang = np.searchsorted(self.sent_off, idx, side="right") - 1
        for l, p in enumerate(self.parsers):
            sel = np.flatnonzero(lang == l)
            if sel.size:
                yield l, p, sel, idx[sel] - self.sent_off[l]

    def inside_outside(self, weights, idx=None):
        weights = np.asarray(weights, dtype=np.float64)
        counts = np.zeros(len(weights))
        logz = np.empty(len(self._idx(idx)))
        for l, p, sel, local in self._split(idx):
            lo, hi = self.rule_off[l], self.rule_off[l + 1]
            c, z = p.inside_outside(weights[lo:hi], local)
            counts[lo:hi] += c
            logz[sel] = z
        return counts, logz

    def viterbi(self, weights, idx=None):
        raise InputError("decode each language with its own grammar (the joint run writes one per language)")

    def sample(self, weights, rng, idx=None):
        raise InputError("sampling is not defined on a joint grammar")

    def split_weights(self, weights):
        """The joint rule vector -> one vector per language."""
        return [np.asarray(weights)[self.rule_off[l]:self.rule_off[l + 1]] for l in range(len(self.parsers))]
