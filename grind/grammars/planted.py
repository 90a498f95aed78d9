"""Planted morphology: words sampled from a known prefix / stem / suffix
inventory and template distribution, with their true segmentation, for
testing morphology grammars (:mod:`grind.grammars.morph`).

Everything is drawn from one ``numpy.random.Generator`` (or a seed), so the
same seed gives the same words."""
from __future__ import annotations

import numpy as np

from grind.errors import InputError

#: Default template distribution over roles (pre, stem, suf): P(template).
TEMPLATES = {("stem",): 0.2, ("pre", "stem"): 0.15, ("stem", "suf"): 0.4, ("pre", "stem", "suf"): 0.25}


def _rng(rng):
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def random_morphs(k, rng, alphabet="abcdefghijklmnoprstuvz", lengths=(1, 4), exclude=()):
    """``k`` distinct random strings over ``alphabet`` of ``lengths[0]..lengths[1]`` characters."""
    rng = _rng(rng)
    lo, hi = lengths
    out: list[str] = []
    seen = set(exclude)
    for _ in range(1000 * k):
        if len(out) == k:
            return out
        m = "".join(rng.choice(list(alphabet), size=int(rng.integers(lo, hi + 1))))
        if m not in seen:
            seen.add(m)
            out.append(m)
    raise InputError(f"cannot draw {k} distinct morphs of length {lo}..{hi} over {alphabet!r}")


def planted_inventory(rng, n_prefixes=5, n_stems=30, n_suffixes=8, alphabet="abcdefghijklmnoprstuvz"):
    """``(prefixes, stems, suffixes)``: random distinct morphs (prefixes and
    suffixes 1-2 characters, stems 3-5), all different from each other."""
    rng = _rng(rng)
    pre = random_morphs(n_prefixes, rng, alphabet, (1, 2))
    suf = random_morphs(n_suffixes, rng, alphabet, (1, 2), exclude=pre)
    stems = random_morphs(n_stems, rng, alphabet, (3, 5), exclude=pre + suf)
    return pre, stems, suf


def planted_words(n, rng, prefixes, stems, suffixes, templates=None, zipf=1.0):
    """``n`` words as ``[(word, [morph, ...]), ...]``: a template (a tuple of
    roles ``pre``/``stem``/``suf``) drawn from ``templates`` (role tuple ->
    probability; default :data:`TEMPLATES`), then each morph from its
    inventory with Zipfian probabilities (rank^-zipf; 0 = uniform).  Tokens,
    not types: a word may come out several times (dedupe for a type corpus)."""
    rng = _rng(rng)
    templates = dict(templates or TEMPLATES)
    inv = {"pre": list(prefixes), "stem": list(stems), "suf": list(suffixes)}
    for role, ms in inv.items():
        if not ms and any(role in t for t in templates):
            raise InputError(f"a template uses role {role!r} but its inventory is empty")
    bad = [r for t in templates for r in t if r not in inv]
    if bad:
        raise InputError(f"unknown role {bad[0]!r} (pre, stem or suf)")
    ts = list(templates)
    p = np.array([templates[t] for t in ts], dtype=float)
    p /= p.sum()

    def probs(k):
        q = np.arange(1, k + 1, dtype=float) ** -zipf
        return q / q.sum()

    role_p = {r: probs(len(ms)) for r, ms in inv.items() if ms}
    out = []
    for _ in range(n):
        t = ts[int(rng.choice(len(ts), p=p))]
        morphs = [inv[r][int(rng.choice(len(inv[r]), p=role_p[r]))] for r in t]
        out.append(("".join(morphs), morphs))
    return out
