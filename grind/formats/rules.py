"""The rule-file format shared by grammars and count files (Mark Johnson's): one rule a line,

    [weight [pseudocount]] LHS --> RHS1 RHS2 ...

with ``# key: value`` header lines.  A rule's key (``LHS --> RHS ...``) is the
same in every file grind writes, so count files of shards add up by key.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from grind.errors import InputError
from grind.formats.textio import quote_line, read_lines

ARROW = "-->"
#: The ``# weights:`` header of count files (grind estep / sum).
COUNTS_HEADER = "expected rule counts"
#: How a grammar file's ``# weights:`` header names Dirichlet pseudo-counts.
PSEUDO_COUNTS = "Dirichlet pseudo-counts"


def rule_key(lhs: str, rhs: tuple[str, ...]) -> str:
    return f"{lhs} {ARROW} {' '.join(rhs)}"


def fingerprint_keys(keys) -> str:
    """16 hex digits of the SHA-256 of rule keys in order, each followed by a newline."""
    h = hashlib.sha256()
    for k in keys:
        h.update(k.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


def parse_rule_line(line: str, where: str, layout: str = "[weight [pseudocount]]"):
    """``[weight [pseudocount]] LHS --> RHS...`` -> (weight, pseudocount, lhs, rhs).
    ``layout`` names the numbers allowed before the LHS (``"count"``: exactly one)."""
    toks = line.split()
    try:
        p = toks.index(ARROW)
    except ValueError:
        raise InputError(f"{where}: no '{ARROW}' in rule line: {quote_line(line)}") from None
    if p == 0:
        raise InputError(f"{where}: rule has no left-hand side: {quote_line(line)}")
    nums, lhs, rhs = toks[: p - 1], toks[p - 1], tuple(toks[p + 1:])
    if len(nums) > (1 if layout == "count" else 2) or (layout == "count" and not nums):
        raise InputError(f"{where}: expected '{layout} LHS --> RHS...', got {quote_line(line)}")
    if not rhs:
        raise InputError(f"{where}: rule {lhs} {ARROW} has an empty right-hand side")
    if ARROW in rhs:
        raise InputError(f"{where}: more than one '{ARROW}' in {quote_line(line)}")
    vals = []
    for s in nums:
        try:
            v = float(s)
        except ValueError:
            raise InputError(f"{where}: weight {quote_line(s)} is not a number") from None
        if not math.isfinite(v) or v < 0:
            raise InputError(f"{where}: weight {s} must be finite and non-negative")
        vals.append(v)
    weight = vals[0] if vals else 1.0
    pseudo = vals[1] if len(vals) > 1 else None
    return weight, pseudo, lhs, rhs


def parse_header_meta(line: str, meta: dict) -> None:
    """Record a ``# key: value`` header line in ``meta``."""
    body = line.lstrip("#").strip()
    if ":" in body:
        k, v = body.split(":", 1)
        k = k.strip()
        if k and " " not in k:
            meta.setdefault(k, v.strip())


def read_rule_file(path: str, layout: str = "[weight [pseudocount]]"):
    """(rules, weights, pseudocounts, meta) of a rule file; errors name file:line.
    ``layout="count"``: one number a line (count files)."""
    rules, weights, pseudos = [], [], []
    meta: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    for lineno, line in read_lines(path):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            parse_header_meta(s, meta)
            continue
        where = f"{path}:{lineno}"
        w, pc, lhs, rhs = parse_rule_line(s, where, layout)
        key = rule_key(lhs, rhs)
        if key in lines_of:
            raise InputError(f"{where}: duplicate rule {key} (first at line {lines_of[key]})")
        lines_of[key] = lineno
        rules.append((lhs, rhs))
        weights.append(w)
        pseudos.append(pc)
    if not rules:
        raise InputError(f"{path}: no rules")
    return rules, np.array(weights, dtype=np.float64), pseudos, meta


def format_weight(w: float) -> str:
    """Shortest text that reads back as exactly the same float64."""
    r = repr(float(w))
    return r[:-2] if r.endswith(".0") else r


def rule_lines(rules, weights, pseudocounts=None):
    for i, (lhs, rhs) in enumerate(rules):
        pc = "" if pseudocounts is None else " " + format_weight(pseudocounts[i])
        yield f"{format_weight(weights[i])}{pc} {rule_key(lhs, rhs)}\n"
