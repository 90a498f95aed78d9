"""Variational EM with logistic-normal priors (Cohen & Smith 2010, JMLR 11,
"Covariance in unsupervised learning of probabilistic grammars", §3-4 and
Appendices B-C).

Every left-hand side A of the grammar is one multinomial k with rules
R_A = (r_1 .. r_{d_k}).  Its parameters are drawn through a logistic normal:

    eta_k ~ N(mu_k, Sigma_k),   theta_{k,i} = exp(eta_{k,i}) / sum_j exp(eta_{k,j})   (§3)

Model I (the default, ``cfg.model == 1``) draws eta afresh for every sentence
m; Model II (``cfg.model == 2``) draws it once for the corpus.

Variational family (§4): q(eta_{m,k}) = N(mu~_{m,k}, diag sigma~^2_{m,k}),
q(y_m) free.  E_q[log theta_{k,i}] is bounded with the first-order bound
log sum_j exp(eta_j) <= log zeta + (1/zeta) sum_j exp(eta_j) - 1, whose
expectation needs E[exp eta_j] = exp(mu~_j + sigma~^2_j / 2):

    E_q[log theta_{k,i}] >= psi~_{k,i} = mu~_{k,i} - log zeta~_k + 1
                              - (1/zeta~_k) sum_j exp(mu~_{k,j} + sigma~^2_{k,j}/2)   (§4, inside Eq. 14)

With q(y_m) proportional to prod_r exp(psi~_r)^{f_r(y)} the bound on
log p(x | mu, Sigma) is (Eq. 14)

    B = sum_m [ log Z_m(exp psi~_m) - sum_k KL( N(mu~_{m,k}, diag sigma~^2_{m,k}) || N(mu_k, Sigma_k) ) ]

    KL_k = 1/2 [ log|Sigma_k| - sum_i log sigma~^2_i + tr(Sigma_k^-1 diag sigma~^2)
                 + (mu~ - mu_k)^T Sigma_k^-1 (mu~ - mu_k) - d_k ]

where log Z_m(w) is the log partition of sentence m under rule weights w
(the kernel: :meth:`grind.kernels.contract.ChartParser.inside_outside`).  (Model II:
one q(eta) for the corpus, so the sum over m only runs over log Z_m.)

E-step (Appendix B), cycles of block coordinate ascent, each increasing B:

1. q(y): inside-outside with weights exp(psi~) gives expected counts
   f~_{k,i} and N_k = sum_i f~_{k,i} (and log Z).
2. mu~ with q(y) fixed: maximise the concave
   J(mu~) = sum_i f~_i mu~_i - (N_k/zeta~) sum_i exp(mu~_i + sigma~^2_i/2)
            - 1/2 (mu~ - mu)^T Sigma^-1 (mu~ - mu),
   dJ/dmu~ = f~ - (N_k/zeta~) exp(mu~ + sigma~^2/2) - Sigma^-1 (mu~ - mu),
   all sentences of a batch and all multinomials at once: by default Newton's
   method per (sentence, multinomial) block with the exact Hessian (the
   problem separates and each block is small); ``cfg.ln_optimizer = "lbfgs"``
   uses scipy's L-BFGS-B on the summed objective, as the paper uses a
   quasi-Newton method (same optimum, slower).  Model I with Newton's method
   runs compiled (:mod:`grind.infer.ln_estep`, csrc/ln.pyx): the same updates,
   held only where a sentence's parses read the grammar; the numpy code below
   is Model II's, L-BFGS-B's and the tests' reference.
3. sigma~^2: per coordinate, Newton's method on s = log sigma~^2 (concave):
   J(s) = -(N_k/zeta~) exp(mu~_i + e^s/2) - 1/2 (Sigma^-1)_{ii} e^s + s/2.
4. zeta~ = sum_i exp(mu~_i + sigma~^2_i / 2) (closed form), then psi~.

M-step (Algorithm 3), over the M parsed sentences:

    mu_k    = (1/M) sum_m mu~_{m,k}
    Sigma_k = (1/M) sum_m [ diag sigma~^2_{m,k} + (mu~_{m,k} - mu_k)(mu~_{m,k} - mu_k)^T ]

(the maximiser of sum_m E_q[log N(eta_{m,k}; mu_k, Sigma_k)]; Model II: M = 1,
so mu = mu~ and Sigma = diag sigma~^2.)

The output grammar holds softmax(mu_k) per multinomial.

Size-1 multinomials (e.g. the DMV's Y_h --> L0_h R0_h) are treated exactly:
theta = softmax of a 1-vector = 1, so log theta = 0 for every eta and the
likelihood does not depend on their coordinates.  Their rule gets psi~ = 0
(not the zeta~ bound's -sigma~^2/2, :func:`exact_psi`), they add no data to
steps 2-3 (:func:`group_coefficients` / :func:`sigma_coefficients` give a = b
= beta = 0 there), q(eta) of their coordinates is the prior (mu~ = mu,
sigma~^2 = Sigma_ii: KL 0), and the M-step leaves their mu and Sigma_ii where
they are.  Within an expert their coordinates are decoupled from the others
(:func:`effective_sigma`: covariances with and among them are 0): the
marginal likelihood depends on an expert only through the marginal of its
other coordinates, which is unchanged, and with the decoupled prior the
mean-field q = prior is exact for them.  (The built-in covariances never
couple them -- no family is read from a Y_h rule; a ``--ln-init`` file that
does sees those covariances zeroed by the first M-step, where Algorithm 3
would put them anyway.)  This is a tighter bound on the same
log p(x | mu, Sigma) than treating them as d = 1 multinomials through zeta~,
and it changes nothing that decodes.

Newton-scaled mu step (``cfg.ln_mstep = "newton"``; default ``"plain"`` =
Algorithm 3).  Let G(mu) = max over q(eta) of the bound for the expected
counts F of this iteration's q(y) (no parsing; :meth:`LogisticNormal._profile`).
By the envelope theorem dG/dmu = sum_m Sigma^-1 (mu~_m - mu), and at the
E-step optimum d mu~_m / d mu = (H_m + Sigma^-1)^-1 Sigma^-1, H_m the data
curvature; in the diagonal approximation (H_m + Sigma^-1)^-1 ~ diag sigma~^2_m
(step 3's optimum is sigma~^2_i = 1 / ((Sigma^-1)_ii + data curvature)), so

    d^2 G / d mu_i^2 ~ -(Sigma^-1)_ii R_i,    R_i = sum_m (1 - sigma~^2_mi (Sigma^-1)_ii).

Algorithm 3's mu = mean_m mu~_m is, in the same approximation, the gradient
step dG/dmu_i / (M (Sigma^-1)_ii); the Newton step -dG/dmu_i / (d^2 G / d mu_i^2)
is M / R_i times longer.  The plain step closes only R_i / M of a coordinate's
gap per iteration (EM's rate: the fraction of the prior variance the data
remove), which is tiny for rare rules (median R/M 3.6e-5 on a WSJ10 sample).
The Newton step, capped:

    mu_i <- mu_i_old + min(M / R_i, NEWTON_CAP) (mean_m mu~_mi - mu_i_old),

with the same fixed points (the step is 0 iff mean mu~ = mu).  Sigma is then
Algorithm 3's around the new mu, Sigma(mu) = (1/M) sum_m [diag sigma~^2_m +
(mu~_m - mu)(mu~_m - mu)^T] = Sigma_plain + (mu_plain - mu)(mu_plain - mu)^T,
the maximiser over Sigma for that mu with q fixed.  Safeguard: with G~ the
value after NEWTON_ROUNDS rounds of steps 2-4 from this iteration's q(eta)
(fixed F), the candidate is accepted only if G~(candidate) >= G~(plain
update); otherwise the extra step (the part beyond the plain one) is halved,
NEWTON_SHRINK, and after the last the plain update is kept.  Monotone with
``ln_warm``: the next E-step starts from the accepted candidate's re-maximised
q(eta), whose bound is >= G~(candidate) + H(q(y)) (log Z >= F psi~ + H(q(y)))
>= G~(plain) + H(q(y)) >= the bound after Algorithm 3 at this iteration's q
>= this iteration's bound.  It is an accelerated M-step of the same
objective (a generalised EM step): what is maximised, the fixed points and
the stopping rule are the paper's; only the path to them is shorter.

Shared logistic normal (§3.3, Definition 1; :mod:`grind.infer.sln`): the normal
vectors are *experts* eta_j ~ N(mu_j, Sigma_j), each covering one or more
multinomials, and eta~_k = (1/|J_k|) sum_{j in J_k} eta_{j,I_{j,k}}.  The
plain logistic normal above is the structure with one expert per multinomial.
The variational family is mean field over experts, q(eta_{m,j}) =
N(mu~_{m,j}, diag sigma~^2_{m,j}), so eta~_k is normal with mean
m~_k = (1/|J_k|) sum_j mu~_{j,I_{j,k}} and variance v~_k = (1/|J_k|^2) sum_j sigma~^2_{j,I_{j,k}};
psi~ above holds with (m~, v~) in place of (mu~, sigma~^2) and the KL sum runs
over experts.  Step 2 and 3 then update one group of experts (experts with
disjoint multinomials, :class:`grind.infer.sln.Group`) at a time with the others
fixed -- block coordinate ascent, every block concave:

    J(x) = sum_i [a_i x_i - b_i exp(w_i x_i)] - 1/2 (x - mu_j)^T Sigma_j^-1 (x - mu_j)

with w_i = 1/|J_k|, a_i = f~_{k,r} w_i and b_i = (N_k/zeta~_k) exp(r_i + v~_{k,r}/2), r_i
the other experts' part of m~_{k,r}; and for s = log sigma~^2_i

    J(s) = -beta_i exp(w_i^2 e^s / 2) - 1/2 (Sigma_j^-1)_ii e^s + s/2,
    beta_i = (N_k/zeta~_k) exp(m~_{k,r} + (v~_{k,r} - w_i^2 sigma~^2_i)/2).

(Plain LN: w = 1, r = 0, so these are exactly steps 2 and 3.)  The M-step is
Algorithm 3 per expert.  Decoding uses theta_k = softmax(m_k), m_k the
average of the experts' means.  The built-in structures (``--tie V|N|VN|A``)
tie the choose and (by default, ``--tie-what choose+stop``) the stop
multinomials of a tag family's heads; with an untied warm-up
(``--tie-warmup N``) the first N iterations run the plain structure and the
tied one then starts from mu_{j,I_{j,k}} = m_k for every expert, which keeps
every m_k, hence the decoding distribution (:meth:`LogisticNormal._switch`).

Arrays are padded: multinomials to the largest d_k (``rows[k, i]`` is the rule
index, -1 for padding), experts of a group to the group's largest L_j.
Padding coordinates are held at mu = mu~ = 0, sigma~^2 = 1 with identity
covariance, which adds exactly 0 to every KL term and never enters a weight.

Parameter files (:func:`save_ln` / :func:`load_ln`), plain text, one block per expert::

    # multinomial LHS              (a multinomial's own expert)
    mu VALUE LHS --> RHS...        (one line per rule of LHS, in covariance order)
    cov V_1 V_2 ... V_d            (d lines: the rows of Sigma)
    # expert NAME: LHS1 LHS2 ...   (a shared expert: the rules of LHS1, then of LHS2, ...)
    mu VALUE LHS1 --> RHS...
    cov ...

Other lines starting with ``#`` are comments.  The file carries the structure:
reading it back (``--ln-init``, ``grind parse --committee``) rebuilds the experts.
"""
from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.optimize import minimize

from grind import log
from grind.errors import InputError, NumericalError
from grind.grammars.grammar import ARROW, rule_key
from grind.formats.textio import header_lines, open_out, read_lines, shown
from grind.grammars.families import read_families
from grind.infer.base import Algorithm
from grind.infer.config import config_class
from grind.infer.options import LN_ITERATIONS, LN_MSTEPS, LN_TOLERANCE, TIE_WARMUP  # noqa: F401 (re-exported)
from grind.infer.training import SHARD, Step

#: Model I's compiled E-step solves this many sentences a shard, here and on a cluster (the same
#: shards, so the same sums): the more blocks of one pattern a shard holds, the fuller its chunks
#: of eight lanes (an iteration 8-14% faster than at SHARD on the WSJ10 and EWT samples)
COMPILED_SHARD = 4 * SHARD
_EXP_MAX = 700.0
#: Named family files shipped in grind/data.
# TIE_WARMUP, LN_TOLERANCE, LN_ITERATIONS, LN_MSTEPS: declared with the options (grind.infer.options).
#: Newton M-step: largest step scale min(M / R_i, NEWTON_CAP); extra-step shrink factors tried in
#: turn; rounds of the fixed-count q(eta) updates in its acceptance test.  Our numbers.
NEWTON_CAP = 20.0
NEWTON_SHRINK = (1.0, 0.5, 0.25, 0.125)
NEWTON_ROUNDS = 2


# ----------------------------------------------------------------------------- packing

class Packing:
    """The multinomials of a grammar as padded arrays.

    ``rows[k, i]``: rule index of coordinate i of multinomial k (-1: padding);
    ``mask`` = rows >= 0; ``sizes[k]`` = d_k; ``lhs[k]``: the LHS symbol.
    """

    def __init__(self, grammar):
        K = len(grammar.nonterminals)
        sizes = np.bincount(grammar.lhs, minlength=K)
        self.K, self.D = K, int(sizes.max())
        self.sizes = sizes
        self.lhs = list(grammar.nonterminals)
        self.rows = np.full((K, self.D), -1, dtype=np.int64)
        fill = np.zeros(K, dtype=np.int64)
        for r, k in enumerate(grammar.lhs):
            self.rows[k, fill[k]] = r
            fill[k] += 1
        self.mask = self.rows >= 0
        #: coordinates of multinomials with >= 2 rules (bounded through zeta~), and of size-1
        #: multinomials (theta = 1 exactly: psi~ = 0, q(eta) = prior; module docstring)
        self.free = self.mask & (sizes > 1)[:, None]
        self.one = self.mask & (sizes == 1)[:, None]
        self.n_rules = len(grammar)

    def unpack(self, values: np.ndarray) -> np.ndarray:
        """Per-rule vector(s) (..., R) -> padded (..., K, D), zeros in padding."""
        v = np.asarray(values)
        out = v[..., np.where(self.mask, self.rows, 0)]
        return np.where(self.mask, out, 0.0)

    def pack(self, arr: np.ndarray) -> np.ndarray:
        """Padded (K, D) -> per-rule vector (R,)."""
        out = np.zeros(self.n_rules)
        out[self.rows[self.mask]] = arr[self.mask]
        return out


def softmax_weights(pk: Packing, mu: np.ndarray) -> np.ndarray:
    """theta_{k,i} = exp(mu_{k,i}) / sum_j exp(mu_{k,j}) (the logistic transform at eta = mu) as a rule vector."""
    m = np.where(pk.mask, mu, -np.inf)
    m = m - m.max(axis=-1, keepdims=True)
    e = np.where(pk.mask, np.exp(m), 0.0)
    return pk.pack(e / e.sum(axis=-1, keepdims=True))


# ----------------------------------------------------------------------------- the bound pieces

def expected_exp(mask, mut, s2):
    """E_q[exp eta] = exp(mu~ + sigma~^2 / 2), zero in padding."""
    return np.where(mask, np.exp(np.minimum(mut + 0.5 * s2, _EXP_MAX)), 0.0)


def closed_zeta(mask, mut, s2):
    """zeta~_k = sum_i exp(mu~_i + sigma~^2_i / 2): the optimum of psi~ (and of Eq. 14) in zeta~
    (1 for a multinomial with no coordinate in ``mask``, e.g. a size-1 one under ``Packing.free``).

    The bound is computed in linear space, so a multinomial whose mu~ + sigma~^2/2 goes above
    700 (exp overflows) or whose every coordinate falls below -745 (zeta~ underflows to 0) is a
    NumericalError, not a silently wrong bound.  The model is unchanged by adding a constant to
    one multinomial's mu (softmax), so such a prior (an ``--ln-init`` file) can be recentred."""
    x = np.where(mask, mut + 0.5 * s2, -np.inf)
    top = x.max(axis=-1)
    if (top > _EXP_MAX).any():
        raise NumericalError(f"logistic normal: mu~ + sigma~^2/2 reaches {float(top.max()):.6g} in "
                             f"{int((top > _EXP_MAX).sum())} multinomial(s), above {_EXP_MAX:g} where exp overflows "
                             "and the bound would be wrong; softmax is unchanged by a constant added to one "
                             "multinomial's mu: recentre the prior's mu (e.g. an --ln-init file's)")
    with np.errstate(under="ignore"):
        z = np.where(mask, np.exp(x), 0.0).sum(axis=-1)
    used = mask.any(-1)
    if (used & (z == 0.0)).any():
        raise NumericalError(f"logistic normal: every mu~ + sigma~^2/2 of {int((used & (z == 0.0)).sum())} "
                             "multinomial(s) is below -745, so zeta~ underflows to 0 and their sentences would drop "
                             "out of the bound; recentre the prior's mu (e.g. an --ln-init file's)")
    return np.where(used, z, 1.0)


def psi_tilde(mask, mut, s2, zeta):
    """psi~ = mu~ - log zeta~ + 1 - (1/zeta~) sum_j exp(mu~_j + sigma~^2_j/2) (-inf outside ``mask``)."""
    e = expected_exp(mask, mut, s2).sum(axis=-1)
    z = np.where(zeta > 0, zeta, 1.0)
    psi = mut - np.log(z)[..., None] + 1.0 - (e / z)[..., None]
    return np.where(mask, psi, -np.inf)


def exact_psi(pk, mut, s2, zeta):
    """The rule weights' logs of q(y): psi~ (:func:`psi_tilde`) on the multinomials with
    >= 2 rules, exactly log theta = 0 on size-1 multinomials, -inf in padding."""
    return np.where(pk.one, 0.0, psi_tilde(pk.free, mut, s2, zeta))


def kl_terms(mask, mut, s2, mu, P, logdet):
    """KL(N(mu~, diag sigma~^2) || N(mu, Sigma)) per (..., k); padding adds 0
    when it holds mu~ = mu = 0, sigma~^2 = 1 and identity covariance."""
    diff = np.where(mask, mut - mu, 0.0)
    Pd = np.einsum("kij,...kj->...ki", P, diff)
    quad = (diff * Pd).sum(-1)
    tr = (np.diagonal(P, axis1=-2, axis2=-1) * np.where(mask, s2, 1.0)).sum(-1)
    ls = np.where(mask, np.log(np.where(mask, s2, 1.0)), 0.0).sum(-1)
    d = mask.shape[-1]
    return 0.5 * (logdet + tr + quad - ls - d)


def effective_sigma(st, Sigmas):
    """The covariances the bound sees: in every expert, the coordinates of size-1
    multinomials are decoupled -- their covariances with the other coordinates and
    among themselves set to 0, their variances kept.  The likelihood does not depend
    on them (theta = 1), so log p(x | mu, Sigma) depends on each expert only through
    the marginal of its other coordinates, which this leaves unchanged; with the
    decoupled prior q(eta) = prior on them is exact (KL 0) under mean field."""
    out = []
    for gr, S in zip(st.groups, Sigmas):
        dead = gr.mask & ~gr.live
        if not dead.any():
            out.append(S)
            continue
        keep = (gr.live[:, :, None] & gr.live[:, None, :]) | np.eye(gr.L, dtype=bool)
        out.append(np.where(keep, S, 0.0))
    return out


def fixed_count_objective(st, F, muts, s2s, zeta, prior):
    """The part of the bound that changes with (mu~, sigma~^2, zeta~) for a fixed
    q(y): sum_{k,i} f~_{k,i} psi~_{k,i} - sum_j KL_j, per leading index.
    ``prior``: (mu_g, Sigma_g^-1, log|Sigma_g|) per group of ``st``."""
    pk = st.pk
    psi = np.where(pk.free, psi_tilde(pk.free, st.combine(muts), st.combine(s2s, 2), zeta), 0.0)
    kl = sum(kl_terms(gr.mask, mt, s, *pr).sum(-1) for gr, mt, s, pr in zip(st.groups, muts, s2s, prior))
    return (F * psi).sum((-1, -2)) - kl


# ----------------------------------------------------------------------------- the optimisers

def group_coefficients(st, gi, F, m, v, zeta, mut_g, c=None):
    """(a, b) of the mu~ objective of group ``gi`` with the other experts fixed
    (module docstring): a = f~ / |J_k|, b = (N_k/zeta~_k) exp(r + v~/2).
    ``c``: N_k/zeta~_k if already computed (:func:`_scale`)."""
    gr = st.groups[gi]
    F = np.where(st.pk.free, F, 0.0)            # size-1 multinomials carry no data on eta (theta = 1)
    rest = gr.gather(m) - mut_g * gr.w
    a = gr.gather(F) * gr.w
    c = _scale(F, zeta, st.pk) if c is None else c
    b = gr.gather_k(c) * np.exp(np.minimum(rest + 0.5 * gr.gather(v), _EXP_MAX))
    return a, np.where(gr.live, b, 0.0)


def sigma_coefficients(st, gi, F, m, v, zeta, s2_g, c=None):
    """beta of the log sigma~^2 objective of group ``gi`` (module docstring)."""
    gr = st.groups[gi]
    v_rest = gr.gather(v) - s2_g * gr.w ** 2
    c = _scale(F, zeta, st.pk) if c is None else c
    beta = gr.gather_k(c) * np.exp(np.minimum(gr.gather(m) + 0.5 * v_rest, _EXP_MAX))
    return np.where(gr.live, beta, 0.0)


def _scale(F, zeta, pk=None):
    """N_k / zeta~_k per multinomial (0 where the multinomial is unused, and with ``pk``
    on size-1 multinomials, which the zeta~ bound does not touch)."""
    N = F.sum(-1)
    if pk is not None:
        N = np.where(pk.sizes > 1, N, 0.0)
    return np.where(N > 0, N / np.where(N > 0, zeta, 1.0), 0.0)


def optimise_mu(mask, a, b, w, x0, mu, P, method="newton", maxiter=100, gtol=1e-9, Sigma=None, cache=None):
    """Step 2 for one group of experts: argmax over x of the concave
    J(x) = sum_i [a_i x_i - b_i exp(w_i x_i)] - 1/2 (x - mu)^T Sigma^-1 (x - mu)
    for every posterior and expert at once (the blocks separate); plain LN:
    a = f~, b = (N/zeta~) exp(sigma~^2/2), w = 1.

    ``method="newton"`` (default): Newton's method per block with the exact
    Hessian -diag(b w^2 exp(w x)) - Sigma^-1 (negative definite), batched
    solves, step halving per block where J would fall, only on blocks that
    still move (an expert no sentence uses stays at x = mu).  Given the
    covariance ``Sigma``, a block whose data touch only some coordinates U
    (a shared expert of which a sentence uses a few multinomials) is solved
    in U alone: the rest R carry no data, so at the optimum
    x_R = mu_R + Sigma_RU Sigma_UU^-1 (x_U - mu_U), and x_U maximises J with
    the marginal precision Sigma_UU^-1 -- the same optimum at |U|^3 instead of L^3.
    ``cache`` (a dict, valid while ``Sigma`` is unchanged) keeps the
    Sigma_UU^-1 and Sigma_RU Sigma_UU^-1 of each (expert, U).
    ``method="lbfgs"``: scipy's L-BFGS-B on the summed objective (the
    paper's choice of a quasi-Newton method; slower for large batches).  Its
    stopping rule sees the sum, so a posterior's optimum depends, at the
    optimiser's tolerance (~1e-8 relative), on the others of its shard."""
    shape = np.broadcast_shapes(x0.shape, a.shape)
    if method == "lbfgs":
        ab = [np.broadcast_to(t, shape) for t in (a, b, w)]
        return _optimise_mu_lbfgs(mask, *ab, np.broadcast_to(x0, shape), mu, P, maxiter, gtol)
    D = shape[-1]
    x0 = np.broadcast_to(x0, shape)
    # a block without data (a = b = 0: J is the prior term alone) has its maximum at mu exactly;
    # only the others need Newton (with warm starts x0 is rarely mu, so this is most of them)
    data = ((np.broadcast_to(a, shape) != 0).any(-1) | (np.broadcast_to(b, shape) != 0).any(-1)).reshape(-1)
    out = np.array(x0, dtype=np.float64, order="C")      # written through reshape views below
    flat = out.reshape(-1, D)
    idle = np.flatnonzero(~data)
    if idle.size:
        ki = np.broadcast_to(np.arange(shape[-2]), shape[:-1]).reshape(-1)[idle]
        flat[idle] = np.where(mask[ki], mu[ki], flat[idle])
    act = np.flatnonzero(data)
    if act.size == 0:
        return out
    kb = np.broadcast_to(np.arange(shape[-2]), shape[:-1]).reshape(-1)[act]
    mb = mask[kb]
    A = np.where(mb, np.broadcast_to(a, shape).reshape(-1, D)[act], 0.0)
    Bv = np.where(mb, np.broadcast_to(b, shape).reshape(-1, D)[act], 0.0)
    W = np.where(mb, w[kb], 0.0)
    x = np.where(mb, x0.reshape(-1, D)[act], 0.0)
    mu_b = np.where(mb, mu[kb], 0.0)
    used = mb & ((A != 0) | (Bv != 0))
    part = (used != mb).any(-1) if Sigma is not None else np.zeros(len(act), dtype=bool)
    whole = np.flatnonzero(~part)
    if whole.size:
        x[whole] = _newton(A[whole], Bv[whole], W[whole], x[whole], mu_b[whole], P, kb[whole], mb[whole],
                           maxiter, gtol)
    if part.any():
        rows = np.flatnonzero(part)
        keys, inv = np.unique(np.column_stack([kb[rows], used[rows]]), axis=0, return_inverse=True)
        for u, key in enumerate(keys):
            r = rows[inv.reshape(-1) == u]
            k, iu = key[0], np.flatnonzero(key[1:])
            ir = np.flatnonzero(mb[r[0]] & ~key[1:].astype(bool))
            ck = (int(k), key[1:].tobytes())
            if cache is None or ck not in cache:
                Q = np.linalg.inv(Sigma[k][np.ix_(iu, iu)])
                got = (Q[None], Sigma[k][np.ix_(ir, iu)] @ Q)
                if cache is not None:
                    cache[ck] = got
            else:
                got = cache[ck]
            sub = np.ix_(r, iu)
            xu = _newton(A[sub], Bv[sub], W[sub], x[sub], mu_b[sub], got[0], np.zeros(len(r), dtype=np.int64),
                         np.ones((len(r), len(iu)), dtype=bool), maxiter, gtol)
            x[sub] = xu
            x[np.ix_(r, ir)] = mu_b[np.ix_(r, ir)] + (xu - mu_b[sub]) @ got[1].T
    flat[act] = np.where(mb, x, flat[act])
    return out


def _newton(A, Bv, W, x, mu_b, P, kb, mb, maxiter, gtol):
    """Batched Newton for :func:`optimise_mu`: block i maximises
    A_i . x - Bv_i . exp(W_i x) - 1/2 (x - mu_i)^T P[kb_i] (x - mu_i) over its
    coordinates ``mb_i``; returns the maximisers (n, d)."""
    x = x.copy()
    D = x.shape[-1]
    eye = np.eye(D)

    def obj(i, xi):
        e = Bv[i] * np.exp(np.minimum(W[i] * xi, _EXP_MAX))
        diff = np.where(mb[i], xi - mu_b[i], 0.0)
        Pd = np.matmul(P[kb[i]], diff[:, :, None])[:, :, 0]
        J = (A[i] * xi).sum(-1) - e.sum(-1) - 0.5 * (diff * Pd).sum(-1)
        return J, np.where(mb[i], A[i] - W[i] * e - Pd, 0.0), e

    cur_i = np.arange(len(x))
    J, g, e = obj(cur_i, x)
    keep = np.abs(g).max(-1, initial=0.0) >= gtol
    cur_i, J, g, e = cur_i[keep], J[keep], g[keep], e[keep]
    for _ in range(maxiter):
        if cur_i.size == 0:
            break
        mm = mb[cur_i]
        H = P[kb[cur_i]] + (W[cur_i] ** 2 * e)[:, :, None] * eye      # -Hessian, positive definite
        H = np.where(mm[:, :, None] & mm[:, None, :], H, eye)
        step = np.where(mm, np.linalg.solve(H, g[:, :, None])[:, :, 0], 0.0)
        cur = x[cur_i]
        for _ in range(40):
            Jn, gn, en = obj(cur_i, cur + step)
            worse = ~(Jn >= J - 1e-12 * np.abs(J))
            if not worse.any():
                break
            step = np.where(worse[:, None], 0.5 * step, step)
        ok = ~worse
        x[cur_i[ok]] = cur[ok] + step[ok]
        keep = ok & (np.abs(gn).max(-1) >= gtol) & (np.abs(step).max(-1) > 1e-14)
        cur_i, J, g, e = cur_i[keep], Jn[keep], gn[keep], en[keep]
    return x


def _optimise_mu_lbfgs(mask, a, b, w, x0, mu, P, maxiter, gtol):
    shape = x0.shape

    def fg(flat):
        xi = flat.reshape(shape)
        e = np.where(mask, b * np.exp(np.minimum(w * xi, _EXP_MAX)), 0.0)
        diff = np.where(mask, xi - mu, 0.0)
        Pd = np.einsum("kij,...kj->...ki", P, diff)
        J = (a * xi).sum() - e.sum() - 0.5 * (diff * Pd).sum()
        return -J, -np.where(mask, a - w * e - Pd, 0.0).ravel()

    res = minimize(fg, x0.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": 10 * maxiter, "gtol": gtol, "ftol": 1e-15, "maxcor": 20})
    out = np.where(mask, res.x.reshape(shape), x0)
    if fg(out.ravel())[0] > fg(np.ascontiguousarray(x0).ravel())[0]:     # never accept a worse point
        return np.array(x0)
    return out


def _sigma_objective(beta, w2, p, s):
    """J(s) of :func:`optimise_sigma`, elementwise."""
    v = np.exp(s)
    return -beta * np.exp(np.minimum(0.5 * w2 * v, _EXP_MAX)) - 0.5 * p * v + 0.5 * s


def optimise_sigma(mask, beta, w2, p, s2, iters=50, tol=1e-10):
    """Step 3 for one group: per coordinate, Newton on s = log sigma~^2 of the concave
    J(s) = -beta exp(w^2 e^s / 2) - 1/2 (Sigma^-1)_ii e^s + s/2,
    dJ/ds = -beta exp(w^2 v/2) w^2 v/2 - (Sigma^-1)_ii v/2 + 1/2 (v = e^s),
    with step halving where a step would lower J (keeps sigma~^2 > 0);
    plain LN: beta = (N/zeta~) exp(mu~), w = 1.  Unused coordinates
    (beta = 0) take the closed form sigma~^2 = 1 / (Sigma^-1)_ii."""
    shape = np.broadcast_shapes(beta.shape, s2.shape)
    mask = np.broadcast_to(mask, shape)
    beta = np.broadcast_to(beta, shape)
    s = np.where(mask, np.log(np.where(mask, s2, 1.0)), 0.0)
    p = np.broadcast_to(p, shape)
    free = mask & (beta <= 0)
    s[free] = -np.log(p[free])
    live = np.flatnonzero((mask & (beta > 0)).ravel())     # the coordinates that move
    bs, ws = beta.ravel()[live], np.broadcast_to(w2, shape).ravel()[live]
    ps, ss = p.ravel()[live], s.ravel()[live]
    act = np.arange(live.size)
    for _ in range(iters):
        if act.size == 0:
            break
        b, w, pp, x = bs[act], ws[act], ps[act], ss[act]
        v = np.exp(x)
        t = 0.5 * w * v
        a = b * np.exp(np.minimum(t, _EXP_MAX))
        g = -a * t - 0.5 * pp * v + 0.5
        h = -a * (t + t * t) - 0.5 * pp * v
        conv = np.abs(g) < tol
        step = np.where(conv, 0.0, np.clip(-g / h, -5.0, 5.0))
        j0 = _sigma_objective(b, w, pp, x)
        for _ in range(40):
            worse = _sigma_objective(b, w, pp, x + step) < j0 - 1e-14 * np.abs(j0)
            if not worse.any():
                break
            step = np.where(worse, 0.5 * step, step)
        step = np.where(worse, 0.0, step)
        ss[act] = x + step
        conv |= np.abs(step) < 1e-12
        act = act[~conv]
    s.ravel()[live] = ss
    return np.where(mask, np.exp(s), 1.0)


# ----------------------------------------------------------------------------- families

def rule_dependents(grammar) -> list:
    """The symbol each rule generates that a family can be read from: for a
    DMV grammar the dependent d of choose(d | h, dir) and the root h of
    root(h); otherwise the terminal of a unary terminal rule; None elsewhere.
    A :func:`grind.infer.sln.joint_grammar` is read language by language."""
    from grind.grammars.dmv import CHOOSE_L, SLOT, dmv_index, is_dmv_grammar
    from grind.infer.sln import split_joint
    parts = split_joint(grammar)
    if parts is not None:
        return [d for g in parts for d in rule_dependents(g)]
    out = [None] * len(grammar)
    if is_dmv_grammar(grammar):
        ix = dmv_index(grammar)
        for r, (k, h, d) in enumerate(zip(ix.kind, ix.head, ix.dep)):
            if k >= CHOOSE_L:
                out[r] = ix.types[d]
            elif k == SLOT["root"]:
                out[r] = ix.types[h]
        return out
    for r, (_lhs, rhs) in enumerate(grammar.rules):
        if len(rhs) == 1 and not grammar.is_nonterminal(rhs[0]):
            out[r] = rhs[0]
    return out


def initial_covariance(grammar, st, kind: str = "identity", families=None) -> list:
    """Sigma_j for every expert (§5.1), one (E, L, L) array per group of
    ``st``: ``identity``, or ``families``: 1 on the diagonal, 0.5 between two
    coordinates whose rules' dependents share a coarse family (``families``:
    a mapping or a family file), 0 elsewhere.  Within one family the block is
    0.5 I + 0.5 J: positive definite."""
    out = [np.broadcast_to(np.eye(gr.L), (gr.E, gr.L, gr.L)).copy() for gr in st.groups]
    if kind == "identity":
        return out
    if kind != "families":
        raise InputError(f"unknown covariance initialisation {kind!r} (identity, families)")
    if families is None:
        raise InputError("covariance initialisation 'families' needs a family file")
    fam = read_families(families) if isinstance(families, str) else dict(families)
    deps = rule_dependents(grammar)
    tags = {d for d in deps if d is not None}
    where = f" {families!r}" if isinstance(families, str) else ""
    if not tags & fam.keys():
        raise InputError(f"--cov families: none of the grammar's {len(tags)} tags ({shown(sorted(tags), 8)}) is in "
                         f"the tag-family mapping{where}, so the covariance would be the identity: is the mapping "
                         "for another tag set (ptb for a UPOS grammar)?")
    missing = sorted(tags - fam.keys())
    if missing:
        log.warn(f"--cov families: {len(missing)} of the grammar's {len(tags)} tags have no family in the mapping"
                 f"{where} ({shown(missing)}): their coordinates start uncorrelated with every other")
    pk = st.pk
    flat_fam = np.array([fam.get(deps[r]) if r >= 0 and deps[r] is not None else None
                         for r in pk.rows.ravel()], dtype=object)
    for gr, S in zip(st.groups, out):
        for e in range(gr.E):
            f = np.where(gr.mask[e], flat_fam[gr.flat[e]], None)
            same = (f[:, None] == f[None, :]) & (f[:, None] != None)     # noqa: E711
            same &= ~np.eye(gr.L, dtype=bool)
            S[e][same] = 0.5
    return out


# ----------------------------------------------------------------------------- files

def save_ln(path, grammar, mu, Sigma, structure=None) -> None:
    """Write (mu, Sigma) in the plain-text format of the module docstring.

    With ``structure`` (a :class:`grind.infer.sln.Structure`): ``mu`` and ``Sigma``
    are lists of per-group arrays (E, L) and (E, L, L).  Without: the plain
    structure, ``mu`` (K, D) or a per-rule vector (R,), ``Sigma`` (K, D, D)."""
    from grind.grammars.grammar import format_weight
    from grind.infer.sln import Structure
    pk = Packing(grammar)
    if structure is None:
        structure = Structure.plain(pk)
        mu = np.asarray(mu, dtype=np.float64)
        mu = pk.unpack(mu) if mu.ndim == 1 else mu
        ks = [np.array([structure.experts[j][1][0] for j in gr.members]) for gr in structure.groups]
        mu = [gr.gather(mu) for gr in structure.groups]
        Sigma = [np.asarray(Sigma)[k][:, :gr.L, :gr.L] for k, gr in zip(ks, structure.groups)]
    with open_out(path) as f:
        f.writelines(header_lines(model="logistic-normal prior", structure=structure.describe()))
        where = {j: (gi, e) for gi, gr in enumerate(structure.groups) for e, j in enumerate(gr.members)}
        for j, (name, ks) in enumerate(structure.experts):
            gi, e = where[j]
            if len(ks) == 1 and name == pk.lhs[ks[0]]:
                f.write(f"# multinomial {name}\n")
            else:
                f.write(f"# expert {name}: " + " ".join(pk.lhs[k] for k in ks) + "\n")
            rules = [pk.rows[k, i] for k in ks for i in range(pk.sizes[k])]
            for i, r in enumerate(rules):
                f.write(f"mu {format_weight(mu[gi][e, i])} {rule_key(*grammar.rules[r])}\n")
            d = len(rules)
            for i in range(d):
                f.write("cov " + " ".join(format_weight(x) for x in Sigma[gi][e, i, :d]) + "\n")


def load_ln(path) -> list:
    """Read a :func:`save_ln` file: a list of experts ``(name, [LHS...], rule
    keys, mu (d,), Sigma (d, d))`` in file order.  Errors name file:line."""
    experts, cur = [], None

    def close(where):
        if cur is not None:
            name, segs, keys, mus, cov = cur
            if len(cov) != len(keys):
                raise InputError(f"{where}: expert {name} has {len(keys)} mu lines but {len(cov)} cov rows")
            S = np.array(cov, dtype=np.float64).reshape(len(keys), len(keys))
            if not np.allclose(S, S.T):
                raise InputError(f"{where}: covariance of {name} is not symmetric")
            try:
                np.linalg.cholesky(S)
            except np.linalg.LinAlgError:
                raise InputError(f"{where}: covariance of {name} is not positive definite") from None
            lhs = [k.split(f" {ARROW} ")[0] for k in keys]
            if sorted(set(lhs), key=lhs.index) != segs:
                raise InputError(f"{where}: the mu lines of {name} are not the rules of {' '.join(segs)} in order")
            experts.append((name, segs, keys, np.array(mus, dtype=np.float64), S))

    last, names = 0, set()
    for lineno, line in read_lines(path):
        last, s = lineno, line.strip()
        where = f"{path}:{lineno}"
        if not s:
            continue
        head = None
        if s.startswith("# multinomial "):
            a = s[len("# multinomial "):].strip()
            head = (a, [a])
        elif s.startswith("# expert "):
            toks = s[len("# expert "):].split()
            if len(toks) < 2 or not toks[0].endswith(":"):
                raise InputError(f"{where}: expected '# expert NAME: LHS1 LHS2 ...'")
            head = (toks[0][:-1], toks[1:])
        if head is not None:
            close(where)
            if head[0] in names:
                raise InputError(f"{where}: expert {head[0]} appears twice")
            names.add(head[0])
            cur = (head[0], head[1], [], [], [])
            continue
        if s.startswith("#"):
            continue
        if cur is None:
            raise InputError(f"{where}: line before the first '# multinomial' or '# expert' header")
        toks = s.split()
        try:
            if toks[0] == "mu":
                if cur[4]:
                    raise InputError(f"{where}: mu line after cov lines")
                if len(toks) < 5 or toks[3] != ARROW or toks[2] not in cur[1]:
                    raise InputError(f"{where}: expected 'mu VALUE LHS {ARROW} RHS...' with LHS one of "
                                     f"{' '.join(cur[1])}")
                cur[3].append(_finite(toks[1], where))
                cur[2].append(rule_key(toks[2], tuple(toks[4:])))
            elif toks[0] == "cov":
                row = [_finite(x, where) for x in toks[1:]]
                if len(row) != len(cur[2]):
                    raise InputError(f"{where}: cov row has {len(row)} values, expected {len(cur[2])}")
                cur[4].append(row)
            else:
                raise InputError(f"{where}: expected a 'mu' or 'cov' line, got {s!r}")
        except ValueError:
            raise InputError(f"{where}: not a number in {s!r}") from None
    close(f"{path}:{last}")
    if not experts:
        raise InputError(f"{path}: no multinomials")
    return experts


def _finite(text, where) -> float:
    v = float(text)
    if not np.isfinite(v):
        raise InputError(f"{where}: {text} is not a finite number")
    return v


def read_ln(grammar, path):
    """:func:`pack_ln` of :func:`load_ln` of ``path``; errors name the file."""
    experts = load_ln(path)
    try:
        return pack_ln(grammar, experts)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def pack_ln(grammar, experts):
    """:func:`load_ln` experts -> (structure, mu per group, Sigma per group) over
    ``grammar`` (rules matched by key; every rule of a covered multinomial must be present)."""
    from grind.infer.sln import Structure
    pk = Packing(grammar)
    kidx = {a: k for k, a in enumerate(pk.lhs)}
    spec = []
    for name, segs, _keys, _m, _S in experts:
        missing = [a for a in segs if a not in kidx]
        if missing:
            raise InputError(f"the logistic-normal file's multinomial {missing[0]} is not in the grammar")
        spec.append((name, tuple(kidx[a] for a in segs)))
    st = Structure(pk, spec)
    mus = [np.zeros((gr.E, gr.L)) for gr in st.groups]
    Sigmas = [np.broadcast_to(np.eye(gr.L), (gr.E, gr.L, gr.L)).copy() for gr in st.groups]
    for gi, gr in enumerate(st.groups):
        for e, j in enumerate(gr.members):
            _, _, keys, m, S = experts[j]
            pos = {key: i for i, key in enumerate(keys)}
            want = [rule_key(*grammar.rules[pk.rows[k, i]]) for k in st.experts[j][1] for i in range(pk.sizes[k])]
            lost = [w for w in want if w not in pos]
            if lost:
                raise InputError(f"no mu for rule {lost[0]} in the logistic-normal file")
            sel = np.array([pos[w] for w in want])
            d = len(sel)
            mus[gi][e, :d] = m[sel]
            Sigmas[gi][e, :d, :d] = S[np.ix_(sel, sel)]
    return st, mus, Sigmas


# ----------------------------------------------------------------------------- the algorithm

def ln_bytes(st, n: int) -> int:
    """About the logistic normal's peak memory (bytes): per group of experts of L outcomes,
    Sigma and its inverse (E L^2 numbers each), and the numpy E-step's Newton step, which holds
    an L x L precision for every (sentence, expert) of a shard of up to SHARD sentences
    (:func:`_newton`; the group with the largest E L^2).  An upper bound for model I's compiled
    E-step (:mod:`grind.infer.ln_estep`), which holds a sentence's blocks only and one Sigma_UU
    a partial pattern."""
    big = max((gr.E * gr.L ** 2 for gr in st.groups), default=0)
    return 8 * (2 * sum(gr.E * gr.L ** 2 for gr in st.groups) + min(n, SHARD) * big)


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_size(grammar, st, n: int) -> None:
    """InputError before any work when :func:`ln_bytes` exceeds the machine's memory: the
    logistic normal is for grammars whose multinomials are small (the DMV's over tags, tens of
    outcomes); a morphology grammar's lexical multinomials have thousands."""
    need, have = ln_bytes(st, n), physical_memory()
    if have is None or need <= have:
        return
    gr = max(st.groups, key=lambda gr: gr.E * gr.L ** 2)
    raise InputError(f"--algo ln on this grammar needs about {need / 2**30:,.0f} GiB ({have / 2**30:,.0f} GiB "
                     f"here): its widest multinomials have {gr.L:,} rules, and the logistic normal holds a "
                     f"{gr.L:,} x {gr.L:,} covariance for each, and in the E-step's Newton steps one such matrix "
                     f"for each of them in each sentence of a {min(n, SHARD)}-sentence shard.  It is meant for "
                     "grammars with small multinomials (the DMV over tags); train this one with vb, cvb, gibbs "
                     "or hastings")


LNConfig = config_class("LNConfig", "ln", "The logistic-normal prior's options: it runs to convergence of the bound "
                        "(:data:`LN_TOLERANCE`), at most :data:`LN_ITERATIONS` iterations.")


def _warm_state(name: str, doc: str) -> property:
    """A property over the dense warm-start array ``name`` of :class:`LogisticNormal`, made
    from the compiled E-step's shards when read or replaced (``_densify``)."""
    def get(self):
        self._densify()
        return getattr(self, name)

    def put(self, value):
        self._densify()
        setattr(self, name, value)
    return property(get, put, doc=doc)


class LogisticNormal(Algorithm):
    """Variational EM for the (shared) logistic-normal prior (Cohen & Smith 2010, Alg. 3).

    ``cfg``: ``iterations`` (a cap), ``tolerance`` (relative change of the
    bound, :meth:`_stop_reason`); optional ``model`` (1: theta per
    sentence, default; 2: theta once), ``tie`` (None: one expert per
    multinomial; ``V``/``N``/``VN``/``A``: TieV, TieN, TieV&N, TieA; or a
    structure file, :mod:`grind.infer.sln`), ``ln_cov`` (``identity`` |
    ``families``), ``families`` (family file or ``upos`` / ``ptb``),
    ``ln_cycles`` (E-step cycles, default 5), ``ln_warm`` (start each E-step
    from the previous one's variational parameters instead of the prior: the
    bound then never decreases across iterations of one prior structure, though the
    --tie warm-up switch may lower it; Model I keeps 2 x sentences
    x experts' dimensions floats), ``ln_optimizer`` (``newton`` | ``lbfgs``,
    step 2), ``ln_init`` (a :func:`save_ln` file: structure, mu and Sigma;
    default mu = log theta0 centred per multinomial in every expert segment,
    Sigma from ``ln_cov``), ``tie_what`` (``choose+stop``, default, or
    ``choose``: which DMV multinomials V/N/VN/A tie, :func:`grind.infer.sln.tie_structure`),
    ``tie_warmup`` (default 0 here; ``train`` uses :data:`TIE_WARMUP`), ``ln_mstep``
    (``plain``: Algorithm 3, default; ``newton``: the Newton-scaled mu step of the
    module docstring; the trace's ``mstep_scale`` is the accepted shrink, 0 = plain), ``jobs``.
    The Dirichlet ``prior`` is not used.

    Untied warm-up (``tie_warmup`` = N > 0 with a tied structure): iterations
    1..N run the plain logistic normal (one expert per multinomial, Sigma from
    ``ln_cov``); before iteration N + 1 (or earlier, if the plain run meets the
    tolerance) :meth:`_switch` hands over to the tied structure.  The state
    records which structure is active (``switched``), so a checkpoint resumes
    on either side of the switch.
    """

    name = "ln"
    output = "probabilities"
    Config = LNConfig

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        from grind.infer.sln import Structure, make_structure
        cfg = LNConfig.of(cfg)
        self.g, self.estep = grammar, estep
        self.parser = estep.parser if hasattr(estep, "parser") else estep
        self.pk = pk = Packing(grammar)
        self.iterations = cfg.iterations
        self.tolerance = cfg.tolerance
        self.model = int(cfg.model)
        if self.model not in (1, 2):
            raise InputError(f"logistic-normal model must be 1 or 2, not {self.model}")
        self.cycles = int(cfg.ln_cycles)
        self.jobs = max(1, int(cfg.jobs))
        self.optimizer = cfg.ln_optimizer
        if self.optimizer not in ("newton", "lbfgs"):
            raise InputError(f"unknown mu~ optimiser {self.optimizer!r} (newton, lbfgs)")
        init = cfg.ln_init
        families = cfg.families
        self._cov, self._families = cfg.ln_cov, families
        self._plain = self._tied = None
        self.warmup = 0
        if init:
            self.st, self.mu, self.Sigma = read_ln(grammar, init)
        else:
            tie = cfg.tie
            self.st = make_structure(grammar, pk, tie, families, cfg.tie_what)
            self.warmup = int(cfg.tie_warmup or 0)
            if self.warmup > 0 and not self.st.is_plain:
                self._plain, self._tied = Structure.plain(pk), self.st
                self.st = self._plain
                if self.warmup >= self.iterations:
                    log.warn(f"--tie-warmup {self.warmup} >= --iterations {self.iterations}: the tied "
                             "structure never takes over")
            th = grammar.normalize(np.asarray(theta0, dtype=np.float64))
            lt = pk.unpack(np.log(np.maximum(th, 1e-300)))
            lt -= np.where(pk.mask, lt, 0).sum(-1, keepdims=True) / pk.sizes[:, None]
            lt = np.where(pk.mask, lt, 0.0)
            check_size(grammar, self.st, len(self.parser.sentences))
            self.mu = [gr.gather(lt) for gr in self.st.groups]
            self.Sigma = initial_covariance(grammar, self.st, self._cov, families)
        self.it, self.prev, self.done = 0, None, False
        self.n = len(self.parser.sentences)
        self.warm = bool(cfg.ln_warm)
        #: Model I on a cluster (an ``estep`` whose ``remote`` is true: Dask): shards run on the
        #: workers (:func:`model1_shard`); needs cold starts and the plain M-step, which keep no
        #: per-sentence state here.
        self.remote = bool(getattr(estep, "remote", False)) and self.model == 1
        self._dmu = self._ds2 = None  # warm starts: q(eta) as dense arrays (the numpy E-step's; _vmu / _vs2)
        self._shards = None          # ... or as the compiled E-step's shards, {lo: (layout, shard, prior)}
        self._shard_units = None     # ... of these units (:meth:`_units`)
        self._layouts = {}           # the compiled E-step's shard layouts, {(units, lo, hi): Layout}
        self._warm_ready = False     # _vmu / _vs2 hold a whole E-step's q(eta) (not one half-way through)
        #: Model I with Newton's mu~ step runs the compiled E-step (grind.infer.ln_estep); False: the numpy one
        self.compiled = self.model == 1 and self.optimizer == "newton"
        self._parsed = None          # Model II, warm: (q(eta), structure, F, logz) of the last parse
        self.mstep = cfg.ln_mstep
        if self.mstep not in LN_MSTEPS:
            raise InputError(f"unknown logistic-normal M-step {self.mstep!r} ({', '.join(LN_MSTEPS)})")
        if self.remote and (self.warm or self.mstep != "plain"):
            raise InputError("logistic-normal model I on a cluster needs cold starts and the plain M-step "
                             "(--ln-warm and --ln-mstep newton keep every sentence's posterior in this process)")

    # -- helpers

    def _prior_terms(self, mus=None, Sigmas=None):
        """(mu_g, Sigma_g^-1, log|Sigma_g|) per group, of the prior the E-step uses
        (:func:`effective_sigma`: size-1 coordinates decoupled); default the current prior."""
        mus = self.mu if mus is None else mus
        Sigmas = self.Sigma if Sigmas is None else Sigmas
        out = []
        for mu, S in zip(mus, effective_sigma(self.st, Sigmas)):
            d = np.diagonal(S, axis1=-2, axis2=-1)
            if not np.any(S - d[..., None] * np.eye(S.shape[-1])):
                # diagonal (Model II's M-step makes it so): the inverse and determinant elementwise
                if np.any(d <= 0):
                    raise NumericalError("a logistic-normal covariance is not positive definite")
                out.append((mu, (1.0 / d)[..., None] * np.eye(S.shape[-1]), np.log(d).sum(-1)))
                continue
            got = _spd_inverse(S)
            if got is None:
                raise NumericalError("a logistic-normal covariance is not positive definite")
            out.append((mu, *got))
        return out

    def _io_sentences(self, idx):
        """Inside-outside per sentence under its own weights -> io(psi) giving F (B,K,D), logz (B,)."""
        pk, parser = self.pk, self.parser

        def io(psi):
            W = np.exp(np.where(pk.mask, psi, -np.inf))
            ws = [pk.pack(W[b]) for b in range(len(idx))]

            def call(b):
                return parser.inside_outside(ws[b], [int(idx[b])])
            if self.jobs > 1 and len(idx) > 1:
                with ThreadPoolExecutor(self.jobs) as ex:
                    parts = list(ex.map(call, range(len(idx))))
            else:
                parts = [call(b) for b in range(len(idx))]
            F = np.stack([pk.unpack(c) for c, _ in parts])
            logz = np.array([z[0] for _, z in parts])
            if np.isnan(logz).any() or not np.all(np.isfinite(F)):
                raise NumericalError("the logistic-normal E-step produced NaN")
            F[~np.isfinite(logz)] = 0.0
            return F, logz
        return io

    def _io_corpus(self):
        """Model II: one weight vector, counts summed over the corpus (leading index 1)."""
        pk = self.pk

        def io(psi):
            w = pk.pack(np.exp(np.where(pk.mask, psi[0], -np.inf)))
            counts, logz = self.estep(w)
            return pk.unpack(counts)[None], logz
        return io

    def e_step(self, io, B, prior, cycles=None, trace=None, init=None, first=None):
        """Appendix B: ``cycles`` rounds of (q(y), mu~, sigma~^2, zeta~) updates
        for B independent variational posteriors starting at ``init`` =
        (mu~, sigma~^2) per group, by default at mu~ = mu, sigma~^2 = 1 / (Sigma^-1)_ii.
        Steps 2 and 3 run group by group (block coordinate ascent).
        ``first``: (F, logz) of a parse already made under exactly ``init``'s
        weights exp(psi~) (:meth:`_reusable`), used instead of the first parse.
        Returns (mu~, sigma~^2, zeta~, F, logz, bound per posterior);
        ``trace`` (a list) gets the bound per cycle."""
        st = self.st
        if init is not None:
            muts, s2s = ([np.array(x, dtype=np.float64) for x in part] for part in init)
        else:
            muts = [np.broadcast_to(mu, (B,) + mu.shape).copy() for mu, _, _ in prior]
            s2s = [np.broadcast_to(np.where(gr.mask, 1.0 / np.diagonal(P, axis1=-2, axis2=-1), 1.0),
                                   (B, gr.E, gr.L)).copy() for gr, (_, P, _) in zip(st.groups, prior)]
        m, v = st.combine(muts), st.combine(s2s, 2)
        zeta = closed_zeta(self.pk.free, m, v)
        cycles = self.cycles if cycles is None else cycles
        for c in range(cycles + 1):
            F, logz = first if c == 0 and first is not None else io(exact_psi(self.pk, m, v, zeta))
            bound = self._bound(muts, s2s, logz, prior)
            if trace is not None:
                trace.append(bound)
            if c == cycles:
                break
            muts, s2s, m, v, zeta = self._update_q(F, muts, s2s, m, v, zeta, prior)
        return muts, s2s, zeta, F, logz, bound

    def _update_q(self, F, muts, s2s, m, v, zeta, prior, Sigmas=None, cache=True):
        """One round of steps 2-4 (mu~, sigma~^2 group by group, then zeta~) for fixed
        q(y) counts F; ``Sigmas``: the covariances behind ``prior`` (default the current
        ones, with :attr:`_cache`).  Each update raises :func:`fixed_count_objective`."""
        st = self.st
        Seff = effective_sigma(st, self.Sigma if Sigmas is None else Sigmas)
        c_k = _scale(F, zeta, self.pk)            # fixed through this round's block updates
        for gi, gr in enumerate(st.groups):
            mu, P, _ = prior[gi]
            a, b = group_coefficients(st, gi, F, m, v, zeta, muts[gi], c_k)
            new = optimise_mu(gr.mask, a, b, gr.w, muts[gi], mu, P, method=self.optimizer, Sigma=Seff[gi],
                              cache=self._cache.setdefault(gi, {}) if cache and Sigmas is None else None)
            m = st.add(m, gi, new - muts[gi])
            muts[gi] = new
            beta = sigma_coefficients(st, gi, F, m, v, zeta, s2s[gi], c_k)
            new = optimise_sigma(gr.mask, beta, gr.w ** 2, np.diagonal(P, axis1=-2, axis2=-1), s2s[gi])
            v = st.add(v, gi, new - s2s[gi], 2)
            s2s[gi] = new
        m, v = st.combine(muts), st.combine(s2s, 2)      # no drift from the increments
        zeta = closed_zeta(self.pk.free, m, v)
        return muts, s2s, m, v, zeta

    def _bound(self, muts, s2s, logz, prior):
        """Eq. 14 per posterior: log Z(exp psi~) - sum_j KL_j (Model II: sum_m log Z_m - sum_j KL_j)."""
        kl = sum(kl_terms(gr.mask, mt, s, *pr).sum(-1)
                 for gr, mt, s, pr in zip(self.st.groups, muts, s2s, prior))
        ok = np.isfinite(logz)
        if self.model == 2:
            return np.array([logz[ok].sum()]) - kl
        return np.where(ok, logz, 0.0) - kl

    # -- the algorithm interface

    def step(self):
        self._maybe_switch()
        if self.finished():
            return None
        prior = self._prior_terms()
        groups = self.st.groups
        S1 = [np.zeros((gr.E, gr.L)) for gr in groups]
        S2 = [np.zeros((gr.E, gr.L, gr.L)) for gr in groups]
        newton = self.mstep == "newton"
        R = [np.zeros((gr.E, gr.L)) for gr in groups]        # sum_m (1 - sigma~^2_mi (Sigma^-1)_ii)
        kept = []                                             # newton: (lo, ok, F, mu~, sigma~^2) per shard

        def collect(lo, muts, s2s, F, ok):
            _accumulate(S1, S2, muts, s2s, ok)
            if newton:
                kept.append((lo, ok, F[ok], [x[ok] for x in muts], [x[ok] for x in s2s]))
                for r, gr, s, (_, P, _) in zip(R, groups, s2s, prior):
                    r += np.where(gr.live, 1.0 - s[ok] * np.diagonal(P, axis1=-2, axis2=-1), 0.0).sum(0)

        if self.model == 2:
            init = self._init(0, 1)
            muts, s2s, _, F, logz, b = self.e_step(self._io_corpus(), 1, prior, init=init,
                                                   first=self._reusable(init))
            self._keep(0, muts, s2s)
            if self.warm:
                self._parsed = ([x.copy() for x in muts + s2s], self.st, F, logz)
            bound, parsed = float(b[0]), int(np.isfinite(logz).sum())
            M = 1
            collect(0, muts, s2s, F, np.ones(1, dtype=bool))
        elif self.remote:
            # on a cluster: each shard's posteriors summed where it ran, added here in shard order
            bound, parsed = 0.0, 0
            rest = None
            for sums, b_part, p_part in self.estep.map_shards(model1_shard, ShardWork(self, prior),
                                                              size=COMPILED_SHARD if self.compiled else None):
                if self.compiled:
                    from grind.infer import ln_estep
                    sums, *more = sums
                    rest = ln_estep.add_shard_sums(rest, [[], *more])
                _add_sums(S1, S2, sums)
                bound += b_part
                parsed += p_part
            if self.compiled and rest is not None:
                ln_estep.finish_sums(S1, S2, rest[1], rest[2],
                                     ln_estep.Prior(self.st, effective_sigma(self.st, self.Sigma), prior))
            M = parsed
        elif self.compiled:
            bound, parsed = self._compiled_estep(prior, S1, S2, R, kept)
            M = parsed
        else:
            bound, parsed = 0.0, 0
            for lo in range(0, self.n, SHARD):
                idx = np.arange(lo, min(lo + SHARD, self.n))
                muts, s2s, _, F, logz, b = self.e_step(self._io_sentences(idx), len(idx), prior,
                                                       init=self._init(lo, len(idx)))
                self._keep(lo, muts, s2s)
                ok = np.isfinite(logz)
                bound += float(b[ok].sum())
                parsed += int(ok.sum())
                collect(lo, muts, s2s, F, ok)
            M = parsed
        self._warm_ready = self.warm
        if parsed == 0:
            raise NumericalError("no sentence of the corpus can be parsed")
        extra = {"parsed": parsed}
        if newton:
            extra["mstep_scale"] = self._newton_m_step(M, S1, S2, R, kept)
        else:
            self._m_step(M, S1, S2)
        self.it += 1
        stop = self._stop_reason(bound)
        if stop:
            extra["stopped"] = stop
        self.prev = bound
        return Step(self.it, bound, self.it * self.n, extra=extra)

    def _stop_reason(self, bound):
        """The stopping rule ("to convergence", Cohen & Smith 2010 §5): stop after
        iteration t when the variational bound B (Eq. 14, summed over sentences)
        changed by at most ``tolerance`` relative to the previous iteration,
        |B_t - B_{t-1}| <= tolerance * |B_{t-1}|, or when t reaches ``iterations``
        (the cap).  Sets ``done`` on convergence; returns why the run stops here,
        or None."""
        if self.converged(self.prev, bound):
            self.done = True
            rel = abs(bound - self.prev) / abs(self.prev) if self.prev else 0.0
            what = "the untied warm-up converged" if self._tied is not None and self.st is not self._tied \
                else "converged"
            return (f"{what} at iteration {self.it}: relative change of the bound {rel:.3g} <= tolerance "
                    f"{self.tolerance:g}")
        if self.it >= self.iterations:
            return (f"reached the cap of {self.iterations} iterations before converging (tolerance "
                    f"{self.tolerance:g})")
        return None

    def _maybe_switch(self):
        """End of the untied warm-up: the tied structure takes over before
        iteration ``warmup`` + 1, or as soon as the plain run has converged."""
        if self._tied is None or self.st is self._tied or self.it >= self.iterations:
            return
        if self.it >= self.warmup or self.done:
            self._switch()

    def _switch(self):
        """Plain -> tied structure without moving the decoding distribution.

        With m_k the current mean of multinomial k (the plain structure's own
        expert), every expert j of the tied structure gets mu_{j,I_{j,k}} = m_k
        on each of its segments, so m_k = (1/|J_k|) sum_{j in J_k} mu_{j,I_{j,k}}
        stays (Definition 1) and softmax(m_k) is unchanged.  A multinomial's own
        expert keeps its learned Sigma; every other expert starts from the
        ``ln_cov`` covariance (identity, or families: 0.5 across its segments
        between rules whose dependents share a family) -- the new experts are
        there to learn covariance *across* multinomials, which the own experts'
        block-diagonal Sigma would not seed.  (The prior covariance of eta~_k
        becomes (Sigma_own + Sigma_shared) / |J_k|^2: tighter, same mean.)
        Warm-started variational parameters (``ln_warm``) are mapped the same
        way: mu~ = m~_k on every segment and sigma~^2 = |J_k| v~_k, which keeps
        m~ and v~ (hence psi~) unchanged.  The stopping test restarts (the
        bound of another structure is not comparable)."""
        plain, tied, pk = self.st, self._tied, self.pk
        m = plain.combine(self.mu)
        mu = [gr.gather(m) for gr in tied.groups]
        Sigma = initial_covariance(self.g, tied, self._cov, self._families)
        where = {plain.experts[j][1][0]: (gi, e)
                 for gi, gr in enumerate(plain.groups) for e, j in enumerate(gr.members)}
        for gi, gr in enumerate(tied.groups):
            for e, j in enumerate(gr.members):
                name, ks = tied.experts[j]
                if len(ks) == 1 and name == pk.lhs[ks[0]]:
                    pg, pe = where[ks[0]]
                    d = int(pk.sizes[ks[0]])
                    Sigma[gi][e, :d, :d] = self.Sigma[pg][pe, :d, :d]
        if self._vmu is not None:
            mt, vt = plain.combine(self._vmu), plain.combine(self._vs2, 2) * tied.n_cover[:, None]
            # C order, as set_state would load them: a resumed run then computes in the same order
            self._vmu = [np.ascontiguousarray(gr.gather(mt)) for gr in tied.groups]
            self._vs2 = [np.ascontiguousarray(np.where(gr.mask, gr.gather(vt), 1.0)) for gr in tied.groups]
        self.st, self.mu, self.Sigma = tied, mu, Sigma
        self.prev, self.done = None, False
        log.info(f"after {self.it} untied iterations the tied structure takes over: {tied.describe()}")

    def _init(self, lo, B):
        """Warm start (``cfg.ln_warm``): the variational parameters of posteriors
        lo..lo+B from the last E-step, or None (start at the prior).  During the
        first E-step the buffers fill shard by shard: a later shard starts at the
        prior too, as it would in a run with one shard."""
        if self.warm and self._warm_ready:
            return [x[lo:lo + B] for x in self._vmu], [x[lo:lo + B] for x in self._vs2]
        return None

    def _reusable(self, init):
        """Model II with warm starts: the last E-step's final parse, (F, logz), if
        ``init`` is the q(eta) it was made under (same structure, every array equal),
        else None.  psi~ depends on q(eta) alone (zeta~ is its closed form), and the
        plain M-step moves only mu and Sigma, so that parse is exactly the first parse
        this E-step would make: reusing it saves one pass over the corpus an iteration
        (one of two with ``ln_cycles`` 1).  The Newton M-step and the switch to a tied
        structure move q(eta); then the arrays differ and the corpus is parsed again."""
        if self._parsed is None or init is None:
            return None
        q, st, F, logz = self._parsed
        if st is not self.st or len(q) != len(init[0]) + len(init[1]):
            return None
        if all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(q, init[0] + init[1])):
            return F, logz
        return None

    def _compiled_estep(self, prior, S1, S2, R, kept):
        """Model I's E-step in the compiled kernel (:mod:`grind.infer.ln_estep`), shard by
        shard (``jobs`` at once), the sums added in shard order; fills ``kept`` and ``R`` for
        the Newton M-step and keeps the shards for warm starts.  Identical sentences
        (:meth:`_units`) are computed once, their contributions weighted by how many there
        are.  Returns (bound, parsed)."""
        from grind.infer import ln_estep
        pv = ln_estep.Prior(self.st, effective_sigma(self.st, self.Sigma), prior)
        units, mult = self._units()
        # the units of each COMPILED_SHARD sentences of the corpus make a shard (those of a remote shard)
        cut = np.searchsorted(units, np.arange(0, self.n + COMPILED_SHARD, COMPILED_SHARD))
        lays = [(int(a), self._layout(units, a, b)) for a, b in zip(cut[:-1], cut[1:]) if b > a]
        newton = self.mstep == "newton"

        def one(job):
            lo, lay = job
            sh, logz, b = ln_estep.run_shard(self.parser, lay, pv, self.cycles, self._init_compiled(lo, lay))
            ok = np.isfinite(logz)
            w = None if mult is None else mult[lo:lo + lay.B]
            return lo, lay, sh, ok, w, b, ln_estep.shard_sums(lay, sh, ok, pv, w)

        if self.jobs > 1 and len(lays) > 1:
            with ThreadPoolExecutor(self.jobs) as ex:
                done = list(ex.map(one, lays))
        else:
            done = [one(job) for job in lays]
        bound, parsed, shards, rest = 0.0, 0, {}, None
        for lo, lay, sh, ok, w, b, (sums, *more) in done:
            bound += float(b[ok].sum() if w is None else (w[ok] * b[ok]).sum())
            parsed += int(ok.sum() if w is None else w[ok].sum())
            _add_sums(S1, S2, sums)
            rest = ln_estep.add_shard_sums(rest, [[], *more])
            if newton:
                kept.append((lo, ok, lay, sh, w))
                g, sent, e, pos = lay.places
                sel = ok[sent] & ~np.repeat(sh.idle.astype(bool), np.diff(lay.arrays["blk_c0"]))
                for gi, r in enumerate(R):
                    m = sel & (g == gi)
                    d = 1.0 - sh.s2[m] * pv.p[gi][e[m], pos[m]]
                    np.add.at(r, (e[m], pos[m]), d if w is None else w[sent[m]] * d)
            shards[lo] = (lay, sh, pv)
        ln_estep.finish_sums(S1, S2, rest[1], rest[2], pv)
        if self.warm:
            self._shards, self._shard_units, self._dmu, self._ds2 = shards, (units, mult), None, None
        return bound, parsed

    #: Model I's compiled E-step computes identical sentences once (:meth:`_units`); False: each
    dedup = True

    def _units(self):
        """The sentences the compiled E-step computes, and how many sentences each stands for
        (None: one each).  Sentences the parser says parse alike (its ``duplicate_keys``) have
        the same q(eta) when they start alike: at the prior, or warm from the last E-step's
        shards (made with these units), or from dense states equal across the copies (else,
        e.g. a checkpoint of another run, every sentence is its own unit)."""
        every = np.arange(self.n, dtype=np.int64), None
        if self.warm and self._warm_ready and self._shards is not None:
            return self._shard_units
        if not self.dedup:
            return every
        if getattr(self, "_distinct", None) is None:
            keys = self.parser.duplicate_keys() if hasattr(self.parser, "duplicate_keys") else None
            first: dict = {}
            of = np.array([first.setdefault(k, len(first)) for k in keys] if keys is not None else [], dtype=np.int64)
            if keys is None or len(first) == self.n:
                self._distinct = False
            else:
                reps = np.zeros(len(first), dtype=np.int64)
                reps[of[::-1]] = np.arange(self.n - 1, -1, -1)          # each key's first sentence
                self._distinct = (reps, np.bincount(of).astype(np.float64), of)
        if self._distinct is False:
            return every
        reps, mult, of = self._distinct
        if self.warm and self._warm_ready and self._dmu is not None:
            if not all(np.array_equal(x, x[reps[of]]) for x in self._dmu + self._ds2):
                return every
        return reps, mult

    def _layout(self, units, lo, hi):
        """The compiled E-step's layout of the shard ``units[lo:hi]`` (made once per structure)."""
        from grind.infer import ln_estep
        idx = units[lo:hi]
        key = (len(units), lo, hi)
        lay = self._layouts.get(key)
        if lay is None or lay.st is not self.st:
            lay = self._layouts[key] = ln_estep.Layout(self.parser, idx, self.st)
        return lay

    def _init_compiled(self, lo, lay):
        """Warm start of the compiled E-step: (x, s2) per block coordinate of the shard at
        ``lo`` from the last E-step's q(eta), or None (start at the prior)."""
        if not (self.warm and self._warm_ready):
            return None
        from grind.infer import ln_estep
        if self._shards is not None and lo in self._shards and self._shards[lo][0] is lay:
            sh = self._shards[lo][1]
            return sh.x, sh.s2
        if self._dmu is None:
            self._densify()
        return ln_estep.from_dense(lay, self._dmu, self._ds2, None) if self._dmu is not None else None

    def _densify(self) -> None:
        """The compiled E-step's shards as the dense per-group arrays (n, E, L) of _vmu / _vs2
        (a sentence computed once for its copies: every copy's row)."""
        if self._shards is None:
            return
        from grind.infer import ln_estep
        vmu = [np.zeros((self.n, gr.E, gr.L)) for gr in self.st.groups]
        vs2 = [np.ones((self.n, gr.E, gr.L)) for gr in self.st.groups]
        for lay, sh, pv in self._shards.values():
            ln_estep.to_dense(lay, sh, pv, vmu, vs2, None)
        units, mult = self._shard_units
        if mult is not None:
            rows = units[self._distinct[2]]
            vmu, vs2 = [x[rows] for x in vmu], [x[rows] for x in vs2]
        self._dmu, self._ds2, self._shards = vmu, vs2, None

    _vmu = _warm_state("_dmu", "Warm starts: every posterior's mu~ per group, (n, E, L) (None before the first one).")
    _vs2 = _warm_state("_ds2", "Warm starts: every posterior's sigma~^2 per group, (n, E, L).")

    def parser_changed(self) -> None:
        """Model II's last parse (:meth:`_reusable`) was made by the parser as it was: drop it."""
        self._parsed = None

    def _keep(self, lo, muts, s2s):
        if not self.warm:
            return
        if self._vmu is None:
            n = 1 if self.model == 2 else self.n
            self._vmu = [np.zeros((n,) + x.shape[1:]) for x in muts]
            self._vs2 = [np.ones((n,) + x.shape[1:]) for x in s2s]
        for dst, src in zip(self._vmu + self._vs2, muts + s2s):
            dst[lo:lo + len(src)] = src

    @property
    def _cache(self):
        """Per-group caches of optimise_mu, dropped whenever Sigma is replaced (M-step, set_state)."""
        if getattr(self, "_cache_for", None) is not self.Sigma:
            self._cache_for, self._cache_d = self.Sigma, {}
        return self._cache_d

    def _m_step(self, M, S1, S2):
        """Algorithm 3 per expert: mu = mean mu~, Sigma = mean(diag sigma~^2 + mu~ mu~^T) - mu mu^T
        (padding: mean 0, identity covariance; size-1 coordinates: mu and variance kept,
        covariances 0 as in :func:`effective_sigma`, where the formulas would put them)."""
        self.mu, self.Sigma = self._plain_m_step(M, S1, S2)

    def _newton_m_step(self, M, S1, S2, R, kept):
        """The accelerated M-step (``ln_mstep = "newton"``, module docstring "Newton-scaled
        mu step"): try mu_old + s * (min(M/R_i, NEWTON_CAP) - 1) + 1 times the plain step for
        s = 1, 1/2, 1/4, 1/8, with Sigma = Algorithm 3's around that mu, and keep the first
        whose profile (:meth:`_profile`) is >= the plain update's; else the plain update.
        With ``ln_warm`` the next E-step starts from the kept candidate's re-maximised q.
        Returns the accepted s (0: the plain update)."""
        mu_p, S_p = self._plain_m_step(M, S1, S2)
        J_p, q_p = self._profile(mu_p, S_p, kept)
        best = (0.0, mu_p, S_p, q_p)
        for s in NEWTON_SHRINK:
            mus, Sigmas = [], []
            for gr, mu0, mp, Sp, r in zip(self.st.groups, self.mu, mu_p, S_p, R):
                f = np.minimum(M / np.maximum(r, M / NEWTON_CAP), NEWTON_CAP)
                f = np.where(gr.live, 1.0 + s * (f - 1.0), 1.0)
                mu = np.where(gr.live, mu0 + f * (mp - mu0), mp)
                d = np.where(gr.live, mp - mu, 0.0)
                mus.append(mu)
                Sigmas.append(Sp + d[:, :, None] * d[:, None, :])
            try:
                J, q = self._profile(mus, Sigmas, kept)
            except NumericalError:
                continue
            if J >= J_p:
                best = (s, mus, Sigmas, q)
                break
        s, self.mu, self.Sigma, q = best
        if self.warm and self.compiled:
            self._shards = {entry[0]: got for entry, got in zip(kept, q)}
        elif self.warm:
            for (lo, ok, _, _, _), (mt, v) in zip(kept, q):
                rows = lo + np.flatnonzero(ok)
                for dst, src in zip(self._vmu + self._vs2, mt + v):
                    dst[rows] = src
        return s

    def _profile(self, mus, Sigmas, kept, rounds=None):
        """The M-step's objective for the prior (mus, Sigmas) with the expected counts F
        of this iteration's E-step fixed: sum over the parsed posteriors of
        :func:`fixed_count_objective` after ``rounds`` (NEWTON_ROUNDS) rounds of
        :meth:`_update_q` from their E-step q(eta) -- no parsing.  Returns the sum and
        the re-maximised (mu~, sigma~^2) per shard."""
        rounds = NEWTON_ROUNDS if rounds is None else rounds
        prior = self._prior_terms(mus, Sigmas)
        total, out = 0.0, []
        if self.compiled:
            from grind.infer import ln_estep
            pv = ln_estep.Prior(self.st, effective_sigma(self.st, Sigmas), prior)
            for _, ok, lay, sh, w in kept:
                J, new = ln_estep.profile(lay, sh, pv, ok, rounds, w)
                total += J
                out.append((lay, new, pv))
            return total, out
        for _, _, F, muts, s2s in kept:
            muts, s2s = [x.copy() for x in muts], [x.copy() for x in s2s]
            m, v = self.st.combine(muts), self.st.combine(s2s, 2)
            zeta = closed_zeta(self.pk.free, m, v)
            for _ in range(rounds):
                muts, s2s, m, v, zeta = self._update_q(F, muts, s2s, m, v, zeta, prior, Sigmas=Sigmas)
            total += float(fixed_count_objective(self.st, F, muts, s2s, zeta, prior).sum())
            out.append((muts, s2s))
        return total, out

    def _plain_m_step(self, M, S1, S2):
        mus, Sigmas = [], []
        for gr, s1, s2, mu0, S0 in zip(self.st.groups, S1, S2, self.mu, effective_sigma(self.st, self.Sigma)):
            mu = np.where(gr.live, s1 / M, np.where(gr.mask, mu0, 0.0))
            Sigma = s2 / M - mu[:, :, None] * mu[:, None, :]
            Sigma = 0.5 * (Sigma + np.swapaxes(Sigma, -1, -2))
            Sigma[~(gr.live[:, :, None] & gr.live[:, None, :])] = 0.0
            i = np.arange(gr.L)
            Sigma[:, i, i] = np.where(gr.live, Sigma[:, i, i], np.where(gr.mask, S0[:, i, i], 1.0))
            mus.append(mu)
            Sigmas.append(Sigma)
        return mus, Sigmas

    def natural_mean(self):
        """m_k = (1/|J_k|) sum_j mu_{j,I_{j,k}}: the mean of eta~ per multinomial (K, D)."""
        return self.st.combine(self.mu)

    def weights(self):
        """The output grammar: softmax(m_k) per multinomial."""
        return softmax_weights(self.pk, self.natural_mean())

    def mean(self):
        return self.weights()

    def get_state(self):
        st = {"it": self.it, "prev": self.prev, "done": self.done,
              "switched": self._tied is not None and self.st is self._tied}
        for gi in range(len(self.mu)):
            st[f"mu_{gi}"], st[f"Sigma_{gi}"] = self.mu[gi], self.Sigma[gi]
            if self._vmu is not None:
                st[f"var_mu_{gi}"], st[f"var_sigma2_{gi}"] = self._vmu[gi], self._vs2[gi]
        return st

    def set_state(self, s):
        self._shards = None
        if self._tied is not None:
            self.st = self._tied if s.get("switched") else self._plain
        elif s.get("switched"):
            raise InputError("the checkpoint was made after the --tie-warmup switch; resume with the same "
                             "--tie, --tie-what and --tie-warmup")
        G = len(self.st.groups)
        if sum(1 for k in s if k.startswith("mu_")) != G:
            raise InputError("the checkpoint's logistic-normal structure is not this run's (--tie, --tie-what, "
                             "--tie-warmup)")
        self.mu = [np.array(s[f"mu_{gi}"], dtype=np.float64) for gi in range(G)]
        self.Sigma = [np.array(s[f"Sigma_{gi}"], dtype=np.float64) for gi in range(G)]
        self.it, self.prev, self.done = int(s["it"]), s["prev"], bool(s["done"])
        if "var_mu_0" in s:
            self._vmu = [np.array(s[f"var_mu_{gi}"], dtype=np.float64) for gi in range(G)]
            self._vs2 = [np.array(s[f"var_sigma2_{gi}"], dtype=np.float64) for gi in range(G)]
        else:
            self._vmu = self._vs2 = None
        self._warm_ready = self._vmu is not None
        self._parsed = None

    def save(self, path):
        save_ln(path, self.g, self.mu, self.Sigma, self.st)


def _spd_inverse(S):
    """(S^-1, log|S|) per matrix of the stack S by Cholesky (csrc/ln.pyx), or None if one is not
    positive definite."""
    from grind.kernels import _ln
    return _ln.spd_inverse(np.ascontiguousarray(S, dtype=np.float64))


def _accumulate(S1, S2, muts, s2s, ok):
    """Add sum_m mu~ and sum_m (diag sigma~^2 + mu~ mu~^T) of the posteriors ``ok``, per group."""
    _add_sums(S1, S2, _shard_sums(muts, s2s, ok))


def _shard_sums(muts, s2s, ok) -> list:
    """Per group, (sum_m mu~, sum_m mu~ mu~^T, sum_m sigma~^2) of the posteriors ``ok``."""
    out = []
    for mt, v in zip(muts, s2s):
        mt, v = mt[ok], v[ok]
        out.append((mt.sum(0), np.einsum("bei,bej->eij", mt, mt), v.sum(0)))
    return out


def _add_sums(S1, S2, sums) -> None:
    """Add a shard's :func:`_shard_sums` to the running S1, S2 (the same additions, in the same
    order, as summing the shard's posteriors here: a remote shard gives the same bits)."""
    for s1, s2, (a, outer, d) in zip(S1, S2, sums):
        s1 += a
        s2 += outer
        i = np.arange(s2.shape[-1])
        s2[:, i, i] += d


class ShardWork:
    """What a Model I E-step shard needs besides the parser, for one iteration: the
    structure, packing, prior terms, covariance and E-step settings (picklable: it goes
    to Dask workers once an iteration).  :func:`model1_shard` runs the shard with the
    E-step of :class:`LogisticNormal` itself (its methods, borrowed below)."""

    model = 1
    jobs = 1

    def __init__(self, ln, prior):
        self.st, self.pk, self.cycles, self.optimizer = ln.st, ln.pk, ln.cycles, ln.optimizer
        self.Sigma, self.prior, self.compiled = ln.Sigma, prior, ln.compiled
        self.parser, self._cache = None, {}
        #: the compiled E-step's weight of each sentence of the corpus (None: 1 each; 0: a copy of
        #: an earlier sentence, which stands for it: LogisticNormal._units)
        self.mult = None
        if ln.compiled:
            units, mult = ln._units()
            if mult is not None:
                self.mult = np.zeros(ln.n)
                self.mult[units] = mult

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("parser", "_cache")}

    def __setstate__(self, state):
        self.__dict__.update(state, parser=None, _cache={})

    e_step = LogisticNormal.e_step
    _update_q = LogisticNormal._update_q
    _bound = LogisticNormal._bound
    _io_sentences = LogisticNormal._io_sentences


def model1_shard(parser, idx, work: ShardWork) -> tuple:
    """One Model I E-step shard (sentences ``idx``, started at the prior) on ``parser``:
    (:func:`_shard_sums` of its posteriors, its part of the bound, sentences parsed) --
    the task a Dask worker runs; the client adds the shards in order (``LogisticNormal.step``)."""
    import os

    from grind.heap import freed_blocks_kept
    run = copy.copy(work)
    run.parser = parser                 # the cache stays the payload's: a worker's shards of one iteration share it
    # freed blocks kept on the heap as `grind train --algo ln` keeps them, over a Dask nanny's trim setting
    # (1.8x slower without), which is set again afterwards
    try:
        trim = int(os.environ.get("MALLOC_TRIM_THRESHOLD_", 128 * 1024))
    except ValueError:
        trim = 128 * 1024
    if work.compiled:               # as LogisticNormal._compiled_estep does it, shard by shard
        from grind.infer import ln_estep
        idx, w = np.asarray(idx, dtype=np.int64), None
        pv = ln_estep.Prior(work.st, effective_sigma(work.st, work.Sigma), work.prior)
        if work.mult is not None:
            w = work.mult[idx]
            idx, w = idx[w > 0], w[w > 0]
            if not len(idx):
                return ln_estep.zero_sums(work.st), 0.0, 0
        lay = ln_estep.Layout(parser, idx, work.st)
        _, logz, b = ln_estep.run_shard(parser, lay, pv, work.cycles)
        ok = np.isfinite(logz)
        return (ln_estep.shard_sums(lay, _, ok, pv, w), float(b[ok].sum() if w is None else (w[ok] * b[ok]).sum()),
                int(ok.sum() if w is None else w[ok].sum()))
    with freed_blocks_kept(force=True, trim_after=trim):
        muts, s2s, _, F, logz, b = run.e_step(run._io_sentences(idx), len(idx), run.prior)
    ok = np.isfinite(logz)
    return _shard_sums(muts, s2s, ok), float(b[ok].sum()), int(ok.sum())
