"""The algorithm contract of :func:`grind.infer.training.train`.

An algorithm is built as ``cls(grammar, estep, prior, theta0, cfg, rng)``:
``grammar`` the rules R (grouped by left-hand side A into R_A), ``estep``
(weights, idx) -> (expected counts E[f_r], log Z per sentence), ``prior``
the Dirichlet hyperparameters alpha_r, ``theta0`` the initial weights,
``cfg`` its :attr:`Algorithm.Config` (or any object with those attributes,
see :meth:`grind.infer.config.TrainConfig.of`), ``rng`` a numpy Generator
(the only randomness, so a checkpoint of state + generator resumes
bit-identically).

* ``step()`` advances by one iteration / minibatch / sweep and returns a
  :class:`grind.infer.training.Step` whose ``objective`` is the quantity the
  algorithm monotonically improves or reports (log-likelihood + log prior for
  EM, the variational bound sum_s log Z_s - KL(q || p) for VB / LN, the
  collapsed log probability for CVB and the samplers), or None when done.
* ``weights()``: what the output grammar holds (probabilities theta, with
  sum_{r in R_A} theta_r = 1, when ``output == "probabilities"``; posterior
  Dirichlet pseudo-counts alpha_hat otherwise).
* ``mean()``: the point estimate held-out evaluation parses with
  (theta, or the posterior mean alpha_hat_r / sum_{R_A} alpha_hat).
* ``get_state()`` / ``set_state()``: every array and scalar the next step
  depends on (JSON-able scalars, numpy arrays).

Batch algorithms stop by one rule, :meth:`Algorithm.converged` (relative
change of the objective |O_t - O_{t-1}| <= tolerance * |O_{t-1}|) or the
cap t = ``iterations`` (:meth:`Algorithm.finished`); an algorithm with a
special rule overrides :meth:`converged`.
"""
from __future__ import annotations

from grind.infer.config import TrainConfig


class Algorithm:
    """Base of the training algorithms (see the module docstring)."""

    #: The --algo name.
    name = "algorithm"
    #: "probabilities" or "pseudo-counts": what :meth:`weights` returns.
    output = "pseudo-counts"
    #: The algorithm's options.
    Config = TrainConfig
    #: Batch algorithms: ``it`` counts iterations up to ``iterations``; ``prev``
    #: is the last objective, ``done`` set once :meth:`converged`.
    it = 0
    prev = None
    done = False
    tolerance = 0.0

    def step(self):  # pragma: no cover - the contract
        raise NotImplementedError

    def weights(self):  # pragma: no cover
        raise NotImplementedError

    def mean(self):  # pragma: no cover
        raise NotImplementedError

    def get_state(self) -> dict:  # pragma: no cover
        raise NotImplementedError

    def set_state(self, s: dict) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- the stopping rule of the batch algorithms

    def converged(self, prev, cur) -> bool:
        """|cur - prev| <= tolerance * |prev| (never on the first iteration)."""
        return prev is not None and abs(cur - prev) <= self.tolerance * abs(prev)

    def finished(self) -> bool:
        """Converged, or the cap of ``iterations`` reached: ``step()`` returns None."""
        return self.done or self.it >= self.iterations

    def observe(self, objective) -> None:
        """After iteration ``it``: ``done`` when :meth:`converged`; ``prev`` = objective."""
        if self.converged(self.prev, objective):
            self.done = True
        self.prev = objective
