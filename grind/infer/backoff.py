"""Back-off for DMV sentences without a tree: the decoding the command line (``grind parse``) and the
Python API (:func:`grind.parse`) share."""
from __future__ import annotations

import numpy as np

from grind import log


def back_off(g, parser, sents, theta, heads, decoder):
    """``heads`` with the sentences that have no tree under ``theta`` (and a tag the grammar has) parsed
    again: with :func:`grind.grammars.dmv.backoff_weights`, then, if still none, by the unconstrained
    DMV of :func:`grind.grammars.dmv.relaxed_grammar`; and the header lines that count them."""
    from grind.grammars.dmv import BACKOFF, backoff_weights, relaxed_grammar
    from grind.kernels.dmv import DMVParser
    bad = [i for i, h in enumerate(heads) if h is None and i not in parser.failures]
    if not bad:
        return heads, {}
    heads = list(heads)
    zero = sorted(parser.zero_types(theta))
    why = {i: parser.explain(i, theta, set(zero)) for i in bad[:10]}

    def decode(p, w, idx):
        idx = np.asarray(idx, dtype=np.int64)
        return p.mbr_heads(w, idx, fallback=[]) if decoder == "mbr" else p.viterbi_heads(w, idx)[0]
    floored = decode(parser, backoff_weights(g, theta), bad)
    first = [i for i, h in zip(bad, floored) if h is not None]
    for i, h in zip(bad, floored):
        heads[i] = h
    rest = [i for i in bad if heads[i] is None]
    if rest:
        full, w = relaxed_grammar(g, theta)
        relaxed = decode(DMVParser(full, [sents[i].tokens for i in rest]), w, np.arange(len(rest)))
        for i, h in zip(rest, relaxed):
            heads[i] = h
    for i in bad[:10]:
        how = "the floored probabilities" if i in first else "the structural constraints relaxed"
        log.warn(f"sentence {sents[i].number} (line {sents[i].line}) has no tree under the grammar's weights "
                 f"({why[i]}): parsed with {how}")
    if len(bad) > 10:
        log.warn(f"... and {len(bad) - 10} more")
    out = {}
    if first or rest:
        tags = f"tags of probability 0 under it: {' '.join(zero)}" if zero else "no tag of probability 0"
        out["backoff"] = (f"{len(bad)} of {len(sents)} sentences had no tree of positive probability under the "
                          f"grammar ({tags}): {len(first)} parsed with every rule's probability p taken as "
                          f"(1 - {BACKOFF:g}) p + {BACKOFF:g} / (rules of its left-hand side)"
                          + (f", {len(rest)} with the constraints relaxed (see constraints_relaxed)" if rest else ""))
        log.warn(out["backoff"])
    if rest:
        out["constraints_relaxed"] = (f"{len(rest)} of {len(sents)} sentences have no tree satisfying the grammar's "
                                      "structural constraints: parsed by the unconstrained DMV over its tags, the "
                                      "rules the constraints leave out floored as the others")
        log.warn(out["constraints_relaxed"])
    return heads, out
