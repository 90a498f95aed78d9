"""Special functions of Dirichlet distributions shared by the algorithms (the collapsed samplers'
objective, VB's KL term): differences of log Gamma values that lose every digit when taken naively
at large alpha."""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln

#: Above this alpha, log Gamma(a + c) - log Gamma(a) is taken from Stirling's series (the difference of two
#: values near a log a loses every digit by a ~ 1e14).
STIRLING_FROM = 1e8


def log_rising(a, c, stirling_from: float = STIRLING_FROM) -> np.ndarray:
    """log Gamma(a + c) - log Gamma(a) (the log rising factorial), elementwise; for a > ``stirling_from``
    c log a + (a + c - 1/2) log1p(c/a) - c + (1/(a + c) - 1/a)/12 (Stirling; the next term,
    (1/a^3 - 1/(a + c)^3)/360, is below 1e-12 c / a^4 relative to nothing: ~1e-17 at a = 1e4)."""
    a, c = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(c, dtype=np.float64))
    out = np.array(gammaln(a + c) - gammaln(a), dtype=np.float64)
    big = a > stirling_from
    if big.any():
        ab, cb = a[big], c[big]
        out[big] = cb * np.log(ab) + (ab + cb - 0.5) * np.log1p(cb / ab) - cb + (1.0 / (ab + cb) - 1.0 / ab) / 12.0
    return out


