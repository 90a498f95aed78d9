"""Rule-count files: ``count LHS --> RHS ...``, keyed exactly like grammar rules.

A count file carries its corpus statistics in the header (``# sentences:``,
``# parsed:``, ``# words:``, ``# loglik:``, and ``# left_out:`` when some
sentences were not counted) so that the files of shards add up
(``grind sum``) to exactly what one ``grind estep`` over the whole corpus
writes, log-likelihood included (up to the rounding of the different order
of addition).  It also says which E-step made it (:data:`META`), so that
counts of different iterations are never added or completed by mistake.
"""
from __future__ import annotations

import hashlib
import math
import os
import re

import numpy as np

from grind.errors import InputError
from grind.formats.corpus import read_options
from grind.formats.rules import COUNTS_HEADER, RuleSet, RuleTable, _parse_file, check_rule_count, rule_key
from grind.formats.textio import header_lines, open_out

STATS = ("sentences", "parsed", "words", "loglik")
#: How far above 0 a count file's ``# loglik:`` (a sum of log probabilities, each <= 0) may be by rounding,
#: per sentence: a sentence of probability 1 can have a log Z of a few 1e-16.
LOGLIK_SLACK = 1e-9
#: Statistics a count file has only when they are not 0 (absent = 0 when files are added):
#: ``left_out``, sentences of the corpus read but not counted (outside the length limits,
#: trees or CoNLL blocks without words, SIGMORPHON rows of several words).
#: ``repeats``, sentences that --types dropped as repeats of an earlier one.
OPTIONAL_STATS = ("left_out", "repeats")
#: Header lines a count file carries through ``grind sum``: the E-step that
#: made it (``probabilities``: under the grammar's rule probabilities, as EM
#: and MAP-EM and VB's initialisation run it; ``vb``: under VB's weights
#: exp(psi(alpha_hat) - psi(sum)) of a grammar of pseudo-counts), the
#: fingerprint of the weights of the grammar it was made with, its start symbol, and the corpus
#: options (the options only, not the file: the shards of one corpus have the same).
META = ("estep", "estep-weights", "estep-start", "corpus",
        "model", "subtypes", "markov", "rare", "preparation",   # a treebank grammar's (estep --trees)
        "shards")
#: The META lines that count files added up must agree on (``shards`` is merged: :func:`merge_shards`).
MUST_AGREE = META[:-1]
_SHARDS = re.compile(r"([0-9]+(?:,[0-9]+)*) of ([0-9]+) \(split ([0-9a-f]+)\)")


class Counts(RuleSet):
    """Expected (or sampled) rule counts with the corpus statistics they came from.

    The rules are held as in :class:`grind.grammars.grammar.Grammar`
    (:class:`grind.formats.rules.RuleSet`): a count file read, or the counts
    of a grammar read, keep only its :class:`RuleTable` until some caller
    asks for ``rules``."""

    def __init__(self, rules: list[tuple[str, tuple[str, ...]]] | None, values, stats: dict | None = None,
                 meta: dict | None = None, table: RuleTable | None = None):
        self._set_rules(rules, table)
        self.values = values
        self.stats: dict[str, float] = {} if stats is None else stats
        #: The :data:`META` header lines (``estep``, ``estep-weights``, ``corpus``) it has.
        self.meta: dict[str, str] = {} if meta is None else meta

    @classmethod
    def of(cls, rules: RuleSet, values, stats: dict | None = None, meta: dict | None = None) -> Counts:
        """Counts of the rules of ``rules`` (a grammar or counts), sharing their list or table."""
        c = cls(rules._rules, values, stats, meta, rules._rt)
        c._src = rules._src
        if "_fp" in rules.__dict__:
            c._fp = rules.__dict__["_fp"]
        return c

    def __repr__(self) -> str:
        return f"Counts({self.n_rules()} rules, stats={self.stats!r}, meta={self.meta!r})"

    def __add__(self, other: Counts) -> Counts:
        """Union of the rule sets (in order of first appearance), values and
        stats summed (``self``'s first), ``meta`` kept; an InputError when
        they cannot be added (:func:`add_mismatch`).  Counts of the same
        rules in the same order (:meth:`same_rules`) are added as arrays,
        sharing the rules."""
        problem = add_mismatch(self, other)
        if problem:
            raise InputError(f"the counts {problem}: add the counts of one E-step over one corpus only")
        stats = {k: self.stats[k] + other.stats[k] for k in STATS if k in self.stats}
        stats.update({k: self.stats.get(k, 0) + other.stats.get(k, 0) for k in OPTIONAL_STATS
                      if k in self.stats or k in other.stats})
        lost = next((k for k, v in stats.items() if not np.isfinite(v)), None)
        if lost is not None:
            raise InputError(f"the '# {lost}:' lines ({self.stats[lost]!r} + {other.stats[lost]!r}) add up beyond the "
                             f"float range ({np.finfo(np.float64).max:.4g}): nothing written")
        meta = dict(self.meta)
        shards = merge_shards(self.meta.get("shards"), other.meta.get("shards"))
        if shards:
            meta["shards"] = shards
        if self.same_rules(other):
            values = np.zeros(self.n_rules())
            values += self.values
            with np.errstate(over="ignore"):
                values += other.values
            out = Counts.of(self, values, stats, meta)
        else:
            index = {rule_key(*r): i for i, r in enumerate(self.rules)}
            rules = list(self.rules)
            extra = [r for r in other.rules if rule_key(*r) not in index]
            rules += extra
            for r in extra:
                index[rule_key(*r)] = len(index)
            values = np.zeros(len(rules))
            values[: len(self.values)] = self.values
            with np.errstate(over="ignore"):
                np.add.at(values, [index[rule_key(*r)] for r in other.rules], other.values)
            out = Counts(rules, values, stats, meta)
        over = np.flatnonzero(np.isinf(values))
        if len(over):
            raise InputError(f"the counts of rule '{out.key_at(int(over[0]))}' add up to more than the largest float "
                             f"({np.finfo(np.float64).max:.4g})"
                             + (f" (and those of {len(over) - 1} more)" if len(over) > 1 else "") + ": nothing written")
        return out

    def write(self, path) -> None:
        """Write the counts as ``grind estep`` writes them (:func:`write_counts`)."""
        write_counts(os.fspath(path), self)

    def merge(self, other: Counts) -> Counts:
        """The sum of two counts of one grammar (``self + other``, as ``grind
        sum``): InputError unless both have the same rule fingerprint (the
        same rules in the same order)."""
        if self.fingerprint() != other.fingerprint():
            raise InputError(f"the counts are not of the same grammar (rule fingerprints {self.fingerprint()} "
                             f"and {other.fingerprint()}): merge adds counts of one grammar only")
        return self + other

    def aligned(self, grammar) -> np.ndarray:
        """The count vector in ``grammar``'s rule order; a counted rule the grammar lacks is an error."""
        out = np.zeros(len(grammar))
        if self.same_rules(grammar):
            out += self.values
            return out
        for r, v in zip(self.rules, self.values):
            k = rule_key(*r)
            if k not in grammar.index:
                raise InputError(f"counted rule {k} is not in the grammar")
            out[grammar.index[k]] += v
        return out


def read_counts(path: str) -> Counts:
    """A count file of ``grind estep`` / ``grind sum``.  InputError (naming the
    file) unless its header says ``# weights: expected rule counts``, its
    statistics are finite numbers (``parsed`` at most ``sentences``), its
    counts finite and non-negative, and (when the header has them) its number
    of rules and grammar fingerprint match the rules read, which catches a
    truncated file."""
    name = "<stdin>" if path == "-" else path
    p = _parse_file(path, "count")
    meta, n_read = p.meta, len(p.weights)
    kind = meta.get("weights")
    if kind is None or not kind.startswith(COUNTS_HEADER):
        has = f"its header says '# weights: {kind}'" if kind is not None else "it has no '# weights:' header line"
        raise InputError(f"{name}: not a count file: {has}, not '# weights: {COUNTS_HEADER}' "
                         "(count files come from grind estep or grind sum)")
    stats = {}
    for k in STATS + OPTIONAL_STATS:
        if k in meta:
            try:
                stats[k] = float(meta[k])
            except ValueError:
                raise InputError(f"{name}: header '# {k}: {meta[k]}' is not a number") from None
            if not math.isfinite(stats[k]) or (k != "loglik" and stats[k] < 0):
                raise InputError(f"{name}: header '# {k}: {meta[k]}' must be a finite"
                                 f"{'' if k == 'loglik' else ' non-negative'} number")
            if k != "loglik" and stats[k] != int(stats[k]):
                raise InputError(f"{name}: header '# {k}: {meta[k]}' is not a whole number: it counts sentences "
                                 "or words (an edited or corrupt count file?)")
    if stats.get("loglik", 0.0) > LOGLIK_SLACK * max(1.0, stats.get("sentences", 1.0)):
        raise InputError(f"{name}: header '# loglik: {meta['loglik']}' is positive, but it is a sum of log "
                         "probabilities, each at most 0 (an edited or corrupt count file?)")
    if stats.get("parsed", 0) > stats.get("sentences", math.inf):
        raise InputError(f"{name}: the header says '# parsed: {meta['parsed']}' of '# sentences: "
                         f"{meta['sentences']}': more sentences parsed than there are")
    check_rule_count(name, meta, n_read, "a truncated or edited count file?")
    c = Counts(p.made, p.weights, stats, {k: meta[k] for k in META if k in meta}, p.table)
    if "grammar" in meta and meta["grammar"] != c.fingerprint():
        raise InputError(f"{name}: the rules read do not match the header's '# grammar: {meta['grammar']}' "
                         f"fingerprint (they give {c.fingerprint()}): a truncated or edited count file?")
    return c


def check_same_grammar(a: Counts, a_path: str, b_fp: str, b_path: str, hint: str) -> None:
    """InputError (naming both files and ``hint``) unless the counts ``a`` have
    the grammar fingerprint ``b_fp`` (the same rules in the same order)."""
    if a.fingerprint() != b_fp:
        raise InputError(f"{a_path} and {b_path} are not of the same grammar (rule fingerprints "
                         f"{a.fingerprint()} and {b_fp}): {hint}")


def shard_meta(header: dict) -> str | None:
    """The ``# shards:`` value of the counts of a corpus file that ``grind split`` wrote (its header's
    ``# shard: i of K`` and, naming the split, a hash of its ``# command:``, ``# corpus:`` and
    ``# corpus-sha256:`` (of the corpus's sentence blocks) lines), else None."""
    m = re.fullmatch(r"([0-9]+) of ([0-9]+)", header.get("shard", ""))
    if not m or "command" not in header:
        return None
    named = f"{header['command']}\n{header.get('corpus', '')}\n{header.get('corpus-sha256', '')}"
    split = hashlib.sha256(named.encode()).hexdigest()[:12]
    return f"{m[1]} of {m[2]} (split {split})"


def _shards(value: str) -> tuple[list[int], int, str]:
    m = _SHARDS.fullmatch(value)
    if not m:
        raise InputError(f"'# shards: {value}' is not 'I,J,... of K (split ID)'")
    return [int(i) for i in m[1].split(",")], int(m[2]), m[3]


def merge_shards(a: str | None, b: str | None) -> str | None:
    """The ``# shards:`` value of the sum of counts with these values: an InputError when one names a shard
    and the other not, they come from different splits, or a shard is counted twice."""
    if a is None and b is None:
        return None
    if a is None or b is None:
        raise InputError("one count file is of a grind split shard and the other is not (# shards: "
                         f"{a or '(none)'} and {b or '(none)'}): add the counts of one split's shards")
    (ia, ka, sa), (ib, kb, sb) = _shards(a), _shards(b)
    if (ka, sa) != (kb, sb):
        raise InputError(f"the counts are of shards of different splits (# shards: {a} and {b})")
    twice = sorted(set(ia) & set(ib))
    if twice:
        raise InputError(f"shard {twice[0]} of {ka} is counted twice (# shards: {a} and {b})")
    return f"{','.join(map(str, sorted(ia + ib)))} of {ka} (split {sa})"


def missing_shards(counts: Counts) -> list[int]:
    """The shards of the split the counts come from that they do not include (empty: all, or not shards)."""
    value = counts.meta.get("shards")
    if value is None:
        return []
    have, k, _ = _shards(value)
    return sorted(set(range(1, k + 1)) - set(have))


def add_mismatch(a: Counts, b: Counts) -> str | None:
    """Why the counts ``a`` and ``b`` cannot be added, ``a``'s value first, or
    None: they come from different E-steps or corpus options
    (:data:`MUST_AGREE`), or one has a statistic (:data:`STATS`) that the
    other lacks, whose sum would count the sentences of one of them only."""
    def agreed(c, k):            # a format --format auto found is the format given explicitly
        v = c.meta.get(k)
        return read_options(v) if k == "corpus" and v else v
    for k in MUST_AGREE:
        if agreed(a, k) != agreed(b, k):
            what = "were read with different corpus options" if k == "corpus" else "come from different E-steps"
            return f"{what} ('# {k}: {a.meta.get(k, '(none)')}' and '# {k}: {b.meta.get(k, '(none)')}')"
    for k in STATS:
        if (k in a.stats) != (k in b.stats):
            va, vb = (_fmt_stat(c.stats[k]) if k in c.stats else "(none)" for c in (a, b))
            return f"do not both have the '# {k}:' line the sum needs ('# {k}: {va}' and '# {k}: {vb}')"
    return None


def write_counts(path: str, counts: Counts, **extra) -> None:
    """Header (what the counts are, the stats, rule count and fingerprint,
    ``counts.meta``, then ``extra``), then one ``count LHS --> RHS`` line a rule."""
    stats = {k: _fmt_stat(counts.stats[k]) for k in STATS if k in counts.stats}
    stats.update((k, _fmt_stat(counts.stats[k])) for k in OPTIONAL_STATS if counts.stats.get(k))
    meta = {k: counts.meta[k] for k in META if k in counts.meta}
    meta.update((k, v) for k, v in extra.items() if k in META)
    extra = {k: v for k, v in extra.items() if k not in META}
    body = counts.rule_text(counts.values)       # checked before a byte is written (stdout is not atomic)
    with open_out(path) as f:
        f.writelines(header_lines(weights=COUNTS_HEADER, **stats, rules=counts.n_rules(),
                                  grammar=counts.fingerprint(), **meta, **extra))
        f.writelines(body)


def _fmt_stat(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))
