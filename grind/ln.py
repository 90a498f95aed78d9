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
(the kernel: :meth:`grind.parser.ChartParser.inside_outside`).  (Model II:
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
   quasi-Newton method (same optimum, slower).
3. sigma~^2: per coordinate, Newton's method on s = log sigma~^2 (concave):
   J(s) = -(N_k/zeta~) exp(mu~_i + e^s/2) - 1/2 (Sigma^-1)_{ii} e^s + s/2.
4. zeta~ = sum_i exp(mu~_i + sigma~^2_i / 2) (closed form), then psi~.

M-step (Algorithm 3), over the M parsed sentences:

    mu_k    = (1/M) sum_m mu~_{m,k}
    Sigma_k = (1/M) sum_m [ diag sigma~^2_{m,k} + (mu~_{m,k} - mu_k)(mu~_{m,k} - mu_k)^T ]

(the maximiser of sum_m E_q[log N(eta_{m,k}; mu_k, Sigma_k)]; Model II: M = 1,
so mu = mu~ and Sigma = diag sigma~^2.)

The output grammar holds softmax(mu_k) per multinomial.

Multinomials are packed into arrays padded to the largest d_k: ``rows[k, i]``
is the rule index (-1 for padding).  Padding coordinates are held at
mu = mu~ = 0, sigma~^2 = 1 with identity covariance, which adds exactly 0 to
every KL term and never enters a weight.

Parameter files (:func:`save_ln` / :func:`load_ln`), plain text::

    # multinomial LHS
    mu VALUE LHS --> RHS...        (one line per rule of LHS, in covariance order)
    cov V_1 V_2 ... V_d            (d lines: the rows of Sigma_LHS)

Other lines starting with ``#`` are comments.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.optimize import minimize

from .errors import InputError, NumericalError
from .grammar import ARROW, rule_key
from .textio import header_lines, open_out, read_lines
from .training import SHARD, Step

_EXP_MAX = 700.0
#: Named family files shipped in grind/data.
FAMILY_FILES = {"upos": "families-upos.txt", "ptb": "families-ptb.txt"}


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
    """zeta~_k = sum_i exp(mu~_i + sigma~^2_i / 2): the optimum of psi~ (and of Eq. 14) in zeta~."""
    return expected_exp(mask, mut, s2).sum(axis=-1)


def psi_tilde(mask, mut, s2, zeta):
    """psi~ = mu~ - log zeta~ + 1 - (1/zeta~) sum_j exp(mu~_j + sigma~^2_j/2) (-inf in padding)."""
    e = expected_exp(mask, mut, s2).sum(axis=-1)
    psi = mut - np.log(zeta)[..., None] + 1.0 - (e / zeta)[..., None]
    return np.where(mask, psi, -np.inf)


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


def fixed_count_objective(mask, F, mut, s2, zeta, mu, P, logdet):
    """The part of the bound that changes with (mu~, sigma~^2, zeta~) for a fixed
    q(y): sum_{k,i} f~_{k,i} psi~_{k,i} - sum_k KL_k, per leading index."""
    psi = np.where(mask, psi_tilde(mask, mut, s2, zeta), 0.0)
    return (F * psi).sum((-1, -2)) - kl_terms(mask, mut, s2, mu, P, logdet).sum(-1)


# ----------------------------------------------------------------------------- the optimisers

def _mu_objective(mask, F, c, half, mu, P, m):
    """J(mu~) per block (..., k), its gradient and Sigma^-1 (mu~ - mu)."""
    e = np.where(mask, np.exp(np.minimum(m + half, _EXP_MAX)), 0.0)
    diff = np.where(mask, m - mu, 0.0)
    Pd = np.einsum("kij,...kj->...ki", P, diff)
    J = (F * m).sum(-1) - (c * e).sum(-1) - 0.5 * (diff * Pd).sum(-1)
    g = np.where(mask, F - c * e - Pd, 0.0)
    return J, g, e


def optimise_mu(mask, F, mut, s2, zeta, mu, P, method="newton", maxiter=100, gtol=1e-9):
    """Step 2: argmax over mu~ of the concave
    J(mu~) = f~ . mu~ - (N/zeta~) sum_i exp(mu~_i + sigma~^2_i/2) - 1/2 (mu~-mu)^T Sigma^-1 (mu~-mu)
    for every leading index and multinomial at once (the problem separates).

    ``method="newton"`` (default): Newton's method per block with the exact
    Hessian -(N/zeta~) diag(exp(mu~ + sigma~^2/2)) - Sigma^-1 (negative
    definite), batched solves, step halving per block where J would fall.
    ``method="lbfgs"``: scipy's L-BFGS-B on the summed objective (the
    paper's choice of a quasi-Newton method; slower for large batches)."""
    N = F.sum(-1)
    c = np.where(N > 0, N / zeta, 0.0)[..., None]
    half = np.where(mask, 0.5 * s2, 0.0)
    if method == "lbfgs":
        return _optimise_mu_lbfgs(mask, F, mut, c, half, mu, P, maxiter, gtol)
    # Newton per block, only on blocks that still move (most multinomials of
    # a sentence are unused: f~ = 0 and mu~ = mu is already optimal)
    shape = np.broadcast_shapes(mut.shape, F.shape)
    D = shape[-1]
    kb = np.broadcast_to(np.arange(shape[-2])[:, None], shape[:-1] + (1,)).reshape(-1)
    mb = np.broadcast_to(mask, shape).reshape(-1, D)
    Fb, cb = np.broadcast_to(F, shape).reshape(-1, D), np.broadcast_to(c, shape[:-1] + (1,)).reshape(-1, 1)
    hb = np.broadcast_to(half, shape).reshape(-1, D)
    m = np.where(mb, np.broadcast_to(mut, shape).reshape(-1, D), 0.0).copy()
    mu_b = np.where(mb, mu[kb], 0.0)
    eye = np.eye(D)

    def obj(i, x):
        e = np.where(mb[i], np.exp(np.minimum(x + hb[i], _EXP_MAX)), 0.0)
        diff = np.where(mb[i], x - mu_b[i], 0.0)
        Pd = np.einsum("bij,bj->bi", P[kb[i]], diff)
        J = (Fb[i] * x).sum(-1) - (cb[i] * e).sum(-1) - 0.5 * (diff * Pd).sum(-1)
        return J, np.where(mb[i], Fb[i] - cb[i] * e - Pd, 0.0), e

    act = np.arange(len(m))
    J, g, e = obj(act, m)
    keep = np.abs(g).max(-1, initial=0.0) >= gtol
    act, J, g, e = act[keep], J[keep], g[keep], e[keep]
    for _ in range(maxiter):
        if act.size == 0:
            break
        H = P[kb[act]] + (cb[act] * e)[:, :, None] * eye      # -Hessian, positive definite
        mm = mb[act]
        H = np.where(mm[:, :, None] & mm[:, None, :], H, eye)
        step = np.where(mm, np.linalg.solve(H, g[:, :, None])[:, :, 0], 0.0)
        cur = m[act]
        for _ in range(40):
            Jn, gn, en = obj(act, cur + step)
            worse = ~(Jn >= J - 1e-12 * np.abs(J))
            if not worse.any():
                break
            step = np.where(worse[:, None], 0.5 * step, step)
        ok = ~worse
        m[act[ok]] = cur[ok] + step[ok]
        keep = ok & (np.abs(gn).max(-1) >= gtol) & (np.abs(step).max(-1) > 1e-14)
        act, J, g, e = act[keep], Jn[keep], gn[keep], en[keep]
    return np.where(mask, m.reshape(shape), mut)


def _optimise_mu_lbfgs(mask, F, mut, c, half, mu, P, maxiter, gtol):
    shape = mut.shape

    def fg(x):
        J, g, _ = _mu_objective(mask, F, c, half, mu, P, x.reshape(shape))
        return -J.sum(), -g.ravel()

    res = minimize(fg, mut.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": 10 * maxiter, "gtol": gtol, "ftol": 1e-15, "maxcor": 20})
    out = np.where(mask, res.x.reshape(shape), mut)
    if fg(out.ravel())[0] > fg(mut.ravel())[0]:          # never accept a worse point
        return mut
    return out


def _sigma_objective(c, m, pii, s):
    """J(s) of :func:`optimise_sigma`, elementwise."""
    v = np.exp(s)
    return -c * np.exp(np.minimum(m + 0.5 * v, _EXP_MAX)) - 0.5 * pii * v + 0.5 * s


def optimise_sigma(mask, F, mut, s2, zeta, P, iters=50, tol=1e-10):
    """Step 3: per coordinate, Newton on s = log sigma~^2 of the concave
    J(s) = -(N/zeta~) exp(mu~ + e^s/2) - 1/2 (Sigma^-1)_ii e^s + s/2,
    dJ/ds = -(N/zeta~) exp(mu~ + v/2) v/2 - (Sigma^-1)_ii v/2 + 1/2 (v = e^s),
    with step halving where a step would lower J (keeps sigma~^2 > 0)."""
    N = F.sum(-1)
    c = np.broadcast_to(np.where(N > 0, N / zeta, 0.0)[..., None], mut.shape)
    pii = np.broadcast_to(np.diagonal(P, axis1=-2, axis2=-1), mut.shape)
    s = np.where(mask, np.log(s2), 0.0)
    m = np.where(mask, mut, 0.0)
    act = np.broadcast_to(mask, mut.shape).copy()      # coordinates still moving
    for _ in range(iters):
        cs, ps, ms, ss = c[act], pii[act], m[act], s[act]
        if ss.size == 0:
            break
        v = np.exp(ss)
        a = cs * np.exp(np.minimum(ms + 0.5 * v, _EXP_MAX))
        g = -a * 0.5 * v - 0.5 * ps * v + 0.5
        h = -a * (0.5 * v + 0.25 * v * v) - 0.5 * ps * v
        conv = np.abs(g) < tol
        step = np.where(conv, 0.0, np.clip(-g / h, -5.0, 5.0))

        j0 = _sigma_objective(cs, ms, ps, ss)
        for _ in range(40):
            worse = _sigma_objective(cs, ms, ps, ss + step) < j0 - 1e-14 * np.abs(j0)
            if not worse.any():
                break
            step = np.where(worse, 0.5 * step, step)
        step = np.where(worse, 0.0, step)
        s[act] = ss + step
        conv |= np.abs(step) < 1e-12
        sub = act[act]
        sub[conv] = False
        act[act] = sub
    return np.where(mask, np.exp(s), 1.0)


# ----------------------------------------------------------------------------- families

def families_path(name: str) -> str:
    """``upos`` / ``ptb`` -> the shipped family file; anything else is a path."""
    if name in FAMILY_FILES:
        return os.path.join(os.path.dirname(__file__), "data", FAMILY_FILES[name])
    return name


def read_families(path: str) -> dict:
    """A family mapping file: ``TAG FAMILY`` per line; lines starting with
    ``#`` are comments (no inline comments: ``#`` and ``$`` are PTB tags)."""
    fam = {}
    for lineno, line in read_lines(families_path(path)):
        s = line.split()
        if not s or s[0].startswith("#"):
            continue
        if len(s) != 2:
            raise InputError(f"{path}:{lineno}: expected 'TAG FAMILY', got {line.strip()!r}")
        fam[s[0]] = s[1]
    return fam


def rule_dependents(grammar) -> list:
    """The symbol each rule generates that a family can be read from: for a
    DMV grammar the dependent d of choose(d | h, dir) and the root h of
    root(h); otherwise the terminal of a unary terminal rule; None elsewhere."""
    from .dmv import CHOOSE_L, SLOT, dmv_index, is_dmv_grammar
    out = [None] * len(grammar)
    if is_dmv_grammar(grammar):
        ix = dmv_index(grammar)
        for r, (k, h, d) in enumerate(zip(ix.kind, ix.head, ix.dep)):
            if k >= CHOOSE_L:
                out[r] = ix.types[d]
            elif k == SLOT["root"]:
                out[r] = ix.types[h]
        return out
    for r, (lhs, rhs) in enumerate(grammar.rules):
        if len(rhs) == 1 and not grammar.is_nonterminal(rhs[0]):
            out[r] = rhs[0]
    return out


def initial_covariance(grammar, pk: Packing, kind: str = "identity", families=None) -> np.ndarray:
    """Sigma_k for every multinomial (§5.1): ``identity``, or ``families``:
    1 on the diagonal, 0.5 between two rules whose dependents share a coarse
    family (``families``: a mapping or a family file), 0 elsewhere.
    Within one family the block is 0.5 I + 0.5 J: positive definite."""
    Sigma = np.broadcast_to(np.eye(pk.D), (pk.K, pk.D, pk.D)).copy()
    if kind == "identity":
        return Sigma
    if kind != "families":
        raise InputError(f"unknown covariance initialisation {kind!r} (identity, families)")
    if families is None:
        raise InputError("covariance initialisation 'families' needs a family file")
    fam = read_families(families) if isinstance(families, str) else dict(families)
    deps = rule_dependents(grammar)
    for k in range(pk.K):
        f = [fam.get(deps[r]) if r >= 0 and deps[r] is not None else None for r in pk.rows[k]]
        for i in range(pk.D):
            for j in range(pk.D):
                if i != j and f[i] is not None and f[i] == f[j]:
                    Sigma[k, i, j] = 0.5
    return Sigma


# ----------------------------------------------------------------------------- files

def save_ln(path, grammar, mu, Sigma) -> None:
    """Write (mu, Sigma) in the plain-text format of the module docstring.

    ``mu`` (K, D) and ``Sigma`` (K, D, D) in :class:`Packing` layout, or
    ``mu`` as a per-rule vector (R,)."""
    pk = Packing(grammar)
    mu = np.asarray(mu, dtype=np.float64)
    if mu.ndim == 1:
        mu = pk.unpack(mu)
    from .grammar import format_weight
    with open_out(path) as f:
        f.writelines(header_lines(model="logistic-normal prior"))
        for k, a in enumerate(pk.lhs):
            d = int(pk.sizes[k])
            f.write(f"# multinomial {a}\n")
            for i in range(d):
                f.write(f"mu {format_weight(mu[k, i])} {rule_key(*grammar.rules[pk.rows[k, i]])}\n")
            for i in range(d):
                f.write("cov " + " ".join(format_weight(x) for x in Sigma[k, i, :d]) + "\n")


def load_ln(path) -> dict:
    """Read a :func:`save_ln` file: ``{LHS: (rule keys, mu (d,), Sigma (d, d))}``
    in file order.  Errors name file:line."""
    blocks, cur = {}, None

    def close(where):
        if cur is not None:
            a, keys, mus, cov = cur
            if len(cov) != len(keys):
                raise InputError(f"{where}: multinomial {a} has {len(keys)} mu lines but {len(cov)} cov rows")
            S = np.array(cov, dtype=np.float64).reshape(len(keys), len(keys))
            if not np.allclose(S, S.T):
                raise InputError(f"{where}: covariance of {a} is not symmetric")
            blocks[a] = (keys, np.array(mus, dtype=np.float64), S)

    last = 0
    for lineno, line in read_lines(path):
        last, s = lineno, line.strip()
        where = f"{path}:{lineno}"
        if not s:
            continue
        if s.startswith("# multinomial "):
            close(where)
            a = s[len("# multinomial "):].strip()
            if a in blocks:
                raise InputError(f"{where}: multinomial {a} appears twice")
            cur = (a, [], [], [])
            continue
        if s.startswith("#"):
            continue
        if cur is None:
            raise InputError(f"{where}: line before the first '# multinomial' header")
        toks = s.split()
        try:
            if toks[0] == "mu":
                if cur[3]:
                    raise InputError(f"{where}: mu line after cov lines")
                if len(toks) < 5 or toks[3] != ARROW or toks[2] != cur[0]:
                    raise InputError(f"{where}: expected 'mu VALUE {cur[0]} {ARROW} RHS...'")
                cur[2].append(float(toks[1]))
                cur[1].append(rule_key(toks[2], tuple(toks[4:])))
            elif toks[0] == "cov":
                row = [float(x) for x in toks[1:]]
                if len(row) != len(cur[1]):
                    raise InputError(f"{where}: cov row has {len(row)} values, expected {len(cur[1])}")
                cur[3].append(row)
            else:
                raise InputError(f"{where}: expected a 'mu' or 'cov' line, got {s!r}")
        except ValueError:
            raise InputError(f"{where}: not a number in {s!r}") from None
    close(f"{path}:{last}")
    if not blocks:
        raise InputError(f"{path}: no multinomials")
    return blocks


def pack_ln(grammar, blocks) -> tuple[np.ndarray, np.ndarray]:
    """:func:`load_ln` blocks -> (mu (K, D), Sigma (K, D, D)) in ``grammar``'s
    :class:`Packing` layout (rules matched by key; every rule must be present)."""
    pk = Packing(grammar)
    mu = np.zeros((pk.K, pk.D))
    Sigma = np.broadcast_to(np.eye(pk.D), (pk.K, pk.D, pk.D)).copy()
    for k, a in enumerate(pk.lhs):
        if a not in blocks:
            raise InputError(f"no multinomial {a} in the logistic-normal file")
        keys, m, S = blocks[a]
        pos = {key: i for i, key in enumerate(keys)}
        want = [rule_key(*grammar.rules[r]) for r in pk.rows[k, :pk.sizes[k]]]
        missing = [w for w in want if w not in pos]
        if missing:
            raise InputError(f"no mu for rule {missing[0]} in the logistic-normal file")
        sel = np.array([pos[w] for w in want])
        d = len(sel)
        mu[k, :d] = m[sel]
        Sigma[k, :d, :d] = S[np.ix_(sel, sel)]
    return mu, Sigma


# ----------------------------------------------------------------------------- the algorithm

class LogisticNormal:
    """Variational EM for the logistic-normal prior (Cohen & Smith 2010, Alg. 3).

    ``cfg``: ``iterations``, ``tolerance``; optional ``model`` (1: theta per
    sentence, default; 2: theta once), ``ln_cov`` (``identity`` | ``families``),
    ``families`` (family file or ``upos`` / ``ptb``), ``ln_cycles`` (E-step
    cycles, default 5), ``ln_warm`` (start each E-step from the previous
    one's variational parameters instead of the prior: the bound then never
    decreases across iterations; Model I keeps 2 x sentences x K x D floats),
    ``ln_optimizer`` (``newton`` | ``lbfgs``, step 2),
    ``ln_init`` (a :func:`save_ln` file: mu and Sigma;
    default mu = log theta0 centred per multinomial, Sigma from ``ln_cov``), ``jobs``.
    The Dirichlet ``prior`` is not used.
    """

    name = "ln"
    output = "probabilities"

    def __init__(self, grammar, estep, prior, theta0, cfg, rng=None):
        self.g, self.estep = grammar, estep
        self.parser = estep.parser if hasattr(estep, "parser") else estep
        self.pk = pk = Packing(grammar)
        self.iterations = cfg.iterations
        self.tolerance = getattr(cfg, "tolerance", 0.0)
        self.model = int(getattr(cfg, "model", 1) or 1)
        if self.model not in (1, 2):
            raise InputError(f"logistic-normal model must be 1 or 2, not {self.model}")
        self.cycles = int(getattr(cfg, "ln_cycles", 5) or 5)
        self.jobs = max(1, int(getattr(cfg, "jobs", 1) or 1))
        self.optimizer = getattr(cfg, "ln_optimizer", "newton") or "newton"
        if self.optimizer not in ("newton", "lbfgs"):
            raise InputError(f"unknown mu~ optimiser {self.optimizer!r} (newton, lbfgs)")
        init = getattr(cfg, "ln_init", None)
        if init:
            self.mu, self.Sigma = pack_ln(grammar, load_ln(init))
        else:
            th = grammar.normalize(np.asarray(theta0, dtype=np.float64))
            with np.errstate(divide="ignore"):
                lt = np.log(np.maximum(th, 1e-300))
            self.mu = pk.unpack(lt)
            self.mu -= np.where(pk.mask, self.mu, 0).sum(-1, keepdims=True) / pk.sizes[:, None]
            self.mu = np.where(pk.mask, self.mu, 0.0)
            self.Sigma = initial_covariance(grammar, pk, getattr(cfg, "ln_cov", "identity") or "identity",
                                            getattr(cfg, "families", None))
        self.it, self.prev, self.done = 0, None, False
        self.n = len(self.parser.sentences)
        self.warm = bool(getattr(cfg, "ln_warm", False))
        self._vmu = self._vs2 = None

    # -- helpers

    def _prior_terms(self):
        """Sigma^-1 and log|Sigma| per multinomial."""
        sign, logdet = np.linalg.slogdet(self.Sigma)
        if np.any(sign <= 0):
            raise NumericalError("a logistic-normal covariance is not positive definite")
        return np.linalg.inv(self.Sigma), logdet

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

    def e_step(self, io, B, P, logdet, cycles=None, trace=None, init=None):
        """Appendix B: ``cycles`` rounds of (q(y), mu~, sigma~^2, zeta~) updates
        for B independent variational posteriors starting at ``init`` =
        (mu~, sigma~^2), by default at mu~ = mu, sigma~^2 = 1 / (Sigma^-1)_ii.
        Returns (mu~, sigma~^2, zeta~, F, logz, bound per posterior);
        ``trace`` (a list) gets the bound per cycle."""
        pk, mask = self.pk, self.pk.mask
        if init is not None:
            mut, s2 = (np.array(x, dtype=np.float64) for x in init)
        else:
            mut = np.broadcast_to(self.mu, (B, pk.K, pk.D)).copy()
            s2 = np.broadcast_to(np.where(mask, 1.0 / np.diagonal(P, axis1=-2, axis2=-1), 1.0),
                                 (B, pk.K, pk.D)).copy()
        zeta = closed_zeta(mask, mut, s2)
        cycles = self.cycles if cycles is None else cycles
        for c in range(cycles + 1):
            F, logz = io(psi_tilde(mask, mut, s2, zeta))
            bound = self._bound(mut, s2, logz, P, logdet)
            if trace is not None:
                trace.append(bound)
            if c == cycles:
                break
            mut = optimise_mu(mask, F, mut, s2, zeta, self.mu, P, method=self.optimizer)
            s2 = optimise_sigma(mask, F, mut, s2, zeta, P)
            zeta = closed_zeta(mask, mut, s2)
        return mut, s2, zeta, F, logz, bound

    def _bound(self, mut, s2, logz, P, logdet):
        """Eq. 14 per posterior: log Z(exp psi~) - sum_k KL_k (Model II: sum_m log Z_m - sum_k KL_k)."""
        kl = kl_terms(self.pk.mask, mut, s2, self.mu, P, logdet).sum(-1)
        ok = np.isfinite(logz)
        if self.model == 2:
            return np.array([logz[ok].sum()]) - kl
        return np.where(ok, logz, 0.0) - kl

    # -- the algorithm interface

    def step(self):
        if self.done or self.it >= self.iterations:
            return None
        pk = self.pk
        P, logdet = self._prior_terms()
        if self.model == 2:
            mut, s2, _, _, logz, b = self.e_step(self._io_corpus(), 1, P, logdet, init=self._init(0, 1))
            self._keep(0, mut, s2)
            bound, parsed = float(b[0]), int(np.isfinite(logz).sum())
            if parsed == 0:
                raise NumericalError("no sentence of the corpus can be parsed")
            self._m_step(1, mut[0], _second(pk, mut[0], s2[0]))
        else:
            bound, parsed = 0.0, 0
            S1 = np.zeros((pk.K, pk.D))
            S2 = np.zeros((pk.K, pk.D, pk.D))
            for lo in range(0, self.n, SHARD):
                idx = np.arange(lo, min(lo + SHARD, self.n))
                mut, s2, _, _, logz, b = self.e_step(self._io_sentences(idx), len(idx), P, logdet,
                                                     init=self._init(lo, len(idx)))
                self._keep(lo, mut, s2)
                ok = np.isfinite(logz)
                bound += float(b[ok].sum())
                parsed += int(ok.sum())
                S1 += mut[ok].sum(0)
                S2 += _second(pk, mut[ok], s2[ok]).sum(0)
            if parsed == 0:
                raise NumericalError("no sentence of the corpus can be parsed")
            self._m_step(parsed, S1, S2)
        self.it += 1
        if self.prev is not None and abs(bound - self.prev) <= self.tolerance * abs(self.prev):
            self.done = True
        self.prev = bound
        return Step(self.it, bound, self.it * self.n, extra={"parsed": parsed})

    def _init(self, lo, B):
        """Warm start (``cfg.ln_warm``): the variational parameters of posteriors
        lo..lo+B from the last E-step, or None (start at the prior)."""
        if self.warm and self._vmu is not None:
            return self._vmu[lo:lo + B], self._vs2[lo:lo + B]
        return None

    def _keep(self, lo, mut, s2):
        if not self.warm:
            return
        if self._vmu is None:
            n = 1 if self.model == 2 else self.n
            self._vmu = np.zeros((n,) + mut.shape[1:])
            self._vs2 = np.ones((n,) + mut.shape[1:])
        self._vmu[lo:lo + len(mut)] = mut
        self._vs2[lo:lo + len(mut)] = s2

    def _m_step(self, M, S1, S2):
        """Algorithm 3: mu = mean mu~, Sigma = mean(diag sigma~^2 + mu~ mu~^T) - mu mu^T."""
        pk = self.pk
        mu = np.where(pk.mask, S1 / M, 0.0)
        Sigma = S2 / M - mu[:, :, None] * mu[:, None, :]
        Sigma = 0.5 * (Sigma + np.swapaxes(Sigma, -1, -2))
        pad = ~(pk.mask[:, :, None] & pk.mask[:, None, :])
        Sigma[pad] = 0.0
        i = np.arange(pk.D)
        Sigma[:, i, i] = np.where(pk.mask, Sigma[:, i, i], 1.0)
        self.mu, self.Sigma = mu, Sigma

    def weights(self):
        """The output grammar: softmax(mu_k) per multinomial."""
        return softmax_weights(self.pk, self.mu)

    def mean(self):
        return self.weights()

    def get_state(self):
        st = {"mu": self.mu, "Sigma": self.Sigma, "it": self.it, "prev": self.prev, "done": self.done}
        if self._vmu is not None:
            st.update(var_mu=self._vmu, var_sigma2=self._vs2)
        return st

    def set_state(self, s):
        self.mu = np.array(s["mu"], dtype=np.float64)
        self.Sigma = np.array(s["Sigma"], dtype=np.float64)
        self.it, self.prev, self.done = int(s["it"]), s["prev"], bool(s["done"])
        self._vmu = np.array(s["var_mu"], dtype=np.float64) if "var_mu" in s else None
        self._vs2 = np.array(s["var_sigma2"], dtype=np.float64) if "var_sigma2" in s else None

    def save(self, path):
        save_ln(path, self.g, self.mu, self.Sigma)


def _second(pk, mut, s2):
    """diag sigma~^2 + mu~ mu~^T per posterior (padding: identity, mu~ = 0)."""
    out = mut[..., :, None] * mut[..., None, :]
    i = np.arange(pk.D)
    out[..., i, i] += np.where(pk.mask, s2, 1.0)
    return out
