"""Committee decoding with a learned logistic-normal prior (Cohen & Smith 2010, §4.1).

One committee member decodes every sentence with its own grammar drawn from
the prior: every expert eta_j ~ N(mu_j, Sigma_j) (for the plain logistic
normal, one per multinomial), eta~_k the average of the experts covering k
(Definition 1), theta_k = softmax(eta~_k).
Members differ by seed; ``grind eval GOLD MEMBER1 MEMBER2 ...`` reports each
member's accuracy and their mean and spread.
"""
from __future__ import annotations

import numpy as np

from grind.infer.ln import Packing, read_ln, softmax_weights


class PriorSampler:
    """Draws rule-weight vectors theta = softmax(eta~) from a (shared) logistic-normal prior file."""

    def __init__(self, grammar, ln_path: str):
        self.pk = Packing(grammar)
        self.st, self.mu, Sigma = read_ln(grammar, ln_path)
        # Padding coordinates carry identity covariance, so every block factorises.
        self.chol = [np.linalg.cholesky(S + 1e-12 * np.eye(S.shape[-1])) for S in Sigma]

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        eta = [mu + np.einsum("kij,kj->ki", L, rng.standard_normal(mu.shape)) for mu, L in zip(self.mu, self.chol)]
        return softmax_weights(self.pk, self.st.combine(eta))


def committee_heads(parser, sampler: PriorSampler, rng, decoder: str = "viterbi"):
    """Heads of every sentence, each decoded under its own grammar drawn from the prior."""
    heads = []
    for i in range(len(parser.sentences)):
        theta = sampler.draw(rng)
        h = parser.mbr_heads(theta, [i]) if decoder == "mbr" else parser.viterbi_heads(theta, [i])[0]
        heads.append(h[0])
    return heads
