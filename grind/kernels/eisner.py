"""Eisner's algorithm: the best projective dependency tree under arc scores.

Given ``scores[i, j]`` = score of word i heading word j (row 0 = the root,
rows 1..n = words; columns 0..n-1 = words), find the projective tree with
exactly one word attached to the root that maximises the sum of its arc
scores (Eisner 1996; McDonald et al. 2005).  With arc posteriors as scores
this is minimum-Bayes-risk decoding for expected attachment accuracy
(Smith & Eisner 2006).  O(n^3) in C (the DMV kernel's Viterbi pass with all
STOP log-weights 0, so a tree's score is exactly its arc-score sum).
"""
from __future__ import annotations

import numpy as np

from grind.kernels import _dmv


def eisner(scores) -> np.ndarray:
    """Heads (1-based, 0 = root) of ``argmax_t sum_{(i -> j) in t} scores[i, j]``
    over single-rooted projective trees; ``scores`` has shape (n+1, n)
    (``-inf`` forbids an arc)."""
    s = np.ascontiguousarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1] + 1:
        raise ValueError(f"scores must have shape (n+1, n), got {s.shape}")
    return _dmv.eisner(s)
