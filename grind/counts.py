"""Rule-count files: ``count LHS --> RHS ...``, keyed exactly like grammar rules.

A count file carries its corpus statistics in the header (``# sentences:``,
``# parsed:``, ``# words:``, ``# loglik:``) so that the files of shards add up
(``grind sum``) to exactly what one ``grind estep`` over the whole corpus
writes, log-likelihood included.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .grammar import read_rule_file, rule_key, rule_lines
from .textio import header_lines, open_out

STATS = ("sentences", "parsed", "words", "loglik")


@dataclass
class Counts:
    """Expected (or sampled) rule counts with the corpus statistics they came from."""

    rules: list[tuple[str, tuple[str, ...]]]
    values: np.ndarray
    stats: dict[str, float] = field(default_factory=dict)

    def __add__(self, other: "Counts") -> "Counts":
        """Union of the rule sets (in order of first appearance), values and stats summed."""
        index = {rule_key(*r): i for i, r in enumerate(self.rules)}
        rules = list(self.rules)
        extra = [r for r in other.rules if rule_key(*r) not in index]
        rules += extra
        for r in extra:
            index[rule_key(*r)] = len(index)
        values = np.zeros(len(rules))
        values[: len(self.values)] = self.values
        np.add.at(values, [index[rule_key(*r)] for r in other.rules], other.values)
        stats = {k: self.stats.get(k, 0) + other.stats.get(k, 0) for k in STATS
                 if k in self.stats or k in other.stats}
        return Counts(rules, values, stats)

    def aligned(self, grammar) -> np.ndarray:
        """The count vector in ``grammar``'s rule order; a counted rule the grammar lacks is an error."""
        out = np.zeros(len(grammar.rules))
        for r, v in zip(self.rules, self.values):
            k = rule_key(*r)
            if k not in grammar.index:
                raise InputError(f"counted rule {k} is not in the grammar")
            out[grammar.index[k]] += v
        return out


def read_counts(path: str) -> Counts:
    rules, values, _pc, meta = read_rule_file(path)
    stats = {}
    for k in STATS:
        if k in meta:
            try:
                stats[k] = float(meta[k])
            except ValueError:
                raise InputError(f"{path}: header '# {k}: {meta[k]}' is not a number") from None
    return Counts(rules, values, stats)


def write_counts(path: str, counts: Counts, **extra) -> None:
    stats = {k: _fmt_stat(counts.stats[k]) for k in STATS if k in counts.stats}
    with open_out(path) as f:
        f.writelines(header_lines(weights="expected rule counts", **stats, **extra))
        f.writelines(rule_lines(counts.rules, counts.values))


def _fmt_stat(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))
