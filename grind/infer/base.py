"""The algorithm contract of :func:`grind.infer.training.train`.

An algorithm is built as ``cls(grammar, estep, prior, theta0, cfg, rng)``:
``grammar`` the rules R (grouped by left-hand side A into R_A), ``estep``
(weights, idx) -> (expected counts E[f_r], log Z per sentence), ``prior``
the Dirichlet hyperparameters alpha_r, ``theta0`` the initial weights,
``cfg`` its :attr:`Algorithm.Config` (or any object with those attributes,
see :meth:`grind.infer.config.TrainConfig.of`), ``rng`` a numpy Generator
(the only randomness, so a checkpoint of state + generator resumes
bit-identically).

* ``update()`` (``update(batch)`` for a minibatch algorithm) does one
  iteration / sweep / minibatch and returns a
  :class:`grind.infer.training.Step` whose ``objective`` is the quantity the
  algorithm monotonically improves or reports (log-likelihood + log prior for
  EM, the variational bound sum_s log Z_s - KL(q || p) for VB / LN, the
  collapsed log probability for CVB and the samplers).  It never decides
  whether to run: :meth:`Algorithm.step` (what the driver calls) does.
* ``weights()``: what the output grammar holds (probabilities theta, with
  sum_{r in R_A} theta_r = 1, when ``output == "probabilities"``; posterior
  Dirichlet pseudo-counts alpha_hat otherwise).
* ``mean()``: the point estimate held-out evaluation parses with
  (theta, or the posterior mean alpha_hat_r / sum_{R_A} alpha_hat).
* ``get_state()`` / ``set_state()``: every array and scalar the next step
  depends on (JSON-able scalars, numpy arrays).

The driver :func:`grind.infer.training.train` calls :meth:`Algorithm.step`,
the one template of every algorithm: None once :meth:`finished`, else the
next minibatch from :attr:`Algorithm.batches` (None at its end: finished)
handed to ``update(batch)``, or ``update()`` for a full-batch algorithm.  So
the stopping rule and the minibatching live here and in the driver's
:class:`grind.infer.training.Minibatches`, once; an algorithm supplies its
update.  ``step()`` stays the driver's (and the tests') entry point: it
returns None when done, as it always has.

Stopping: batch algorithms stop by one rule, :meth:`Algorithm.converged`
(relative change of the objective |O_t - O_{t-1}| <= tolerance * |O_{t-1}|,
recorded by :meth:`observe` after an update) or the cap t = ``iterations``
(:meth:`Algorithm.finished`); an algorithm with a special rule overrides
:meth:`converged`.  Minibatch algorithms (streaming, stochastic) stop when
their :class:`grind.infer.training.Minibatches` are exhausted (the stream's
end, or the last epoch).

Two algorithms override ``step()`` itself and keep their own stop:
:class:`grind.infer.ln.LogisticNormal` and :class:`grind.infer.mixture.Mixture`.
For them "finished?" cannot be asked from outside before the step, because
the step changes the state the answer depends on first: ln's tied warm-up
switches structure at the start of a step (and clears ``done`` when the
untied run has converged, so a converged warm-up goes on, tied), and a
mixture's C-step moves the coefficients beta and clears its base's ``done``
whenever the schedule's bounds move (beta moving on means not converged).
A driver that asked :meth:`finished` first would stop those runs early.
"""
from __future__ import annotations

import math

from grind.errors import NumericalError
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
    #: The objective's last relative change (:meth:`observe`; None: the algorithm has no stopping tolerance).
    _change: float | None = None

    #: Minibatch algorithms: the source of their minibatches (a
    #: :class:`grind.infer.training.Minibatches`, set up from the options at
    #: construction; its position is part of the algorithm's state).  None: a
    #: full-batch algorithm, whose ``update()`` takes no batch.
    batches = None

    def step(self):
        """One step as the driver runs it: None once :meth:`finished` (or the
        minibatches are exhausted), else the :class:`Step` of ``update()``."""
        if self.finished():
            return None
        if self.batches is None:
            return self._stop_noted(self._checked(self._reported(self.update())))
        batch = self.batches.next()
        if batch is None:
            self.done = True
            return None
        return self._stop_noted(self._checked(self._reported(self.update(batch))))

    def _reported(self, st):
        """``st`` with what the E-step reports of its last call added to its extras (a
        :class:`grind.infer.posterior_reg.PosteriorRegularizer`'s dual and rule share), if it reports."""
        source = getattr(self, "estep", None) or getattr(self, "parser", None)
        extra = getattr(source, "trace_extra", None)
        if st is not None and callable(extra):
            st.extra.update(extra())
        return st

    def _stop_noted(self, st):
        """``st`` with ``extra["stopped"]`` saying why the run ends at it, when it does: converged
        (:meth:`converged`, with the relative change), the cap of ``iterations``, or the last epoch."""
        if st is None or "stopped" in st.extra:
            return st
        if self.done and self._change is not None:
            st.extra["stopped"] = (f"converged at iteration {self.it}: relative change of the objective "
                                   f"{self._change:.3g} <= tolerance {self.tolerance:g}")
        elif self.batches is None and self.it >= self.iterations:
            st.extra["stopped"] = f"reached the cap of {self.iterations} iterations" + (
                f" before converging (tolerance {self.tolerance:g})" if self._change is not None else "")
        elif self.batches is not None and self.batches.exhausted():
            st.extra["stopped"] = "the last minibatch of the last epoch"
        return st

    def _checked(self, st):
        """``st``, unless its objective is NaN or infinite: then the run stops with a NumericalError."""
        if st is not None and not math.isfinite(st.objective):
            raise NumericalError(f"{self.name}: the objective of step {st.step} is {st.objective!r}: stopped "
                                 "(an extreme hyperparameter, such as a subnormal or huge --alpha, or weights "
                                 "that overflow)")
        return st

    def update(self, batch=None):  # pragma: no cover - the contract
        """One iteration / sweep (or one minibatch ``batch``); returns its Step."""
        raise NotImplementedError

    def weights(self):  # pragma: no cover
        raise NotImplementedError

    def mean(self):  # pragma: no cover
        raise NotImplementedError

    def get_state(self) -> dict:  # pragma: no cover
        raise NotImplementedError

    def set_state(self, s: dict) -> None:  # pragma: no cover
        raise NotImplementedError

    def parser_changed(self) -> None:
        """The E-step's parser now computes something else for the same weights (a
        mixture's coefficients moved): an algorithm that keeps a parse to reuse drops it."""

    # -- the stopping rule of the batch algorithms

    def converged(self, prev, cur) -> bool:
        """|cur - prev| <= tolerance * |prev| (never on the first iteration)."""
        return prev is not None and abs(cur - prev) <= self.tolerance * abs(prev)

    def finished(self) -> bool:
        """Converged, or the cap of ``iterations`` reached (a minibatch
        algorithm: its minibatches exhausted): ``step()`` returns None."""
        if self.done:
            return True
        if self.batches is not None:
            return self.batches.exhausted()
        return self.it >= self.iterations

    def observe(self, objective) -> None:
        """After iteration ``it``: ``done`` when :meth:`converged`; ``prev`` = objective."""
        if self.prev is not None:
            if self.prev:
                self._change = abs(objective - self.prev) / abs(self.prev)
            else:                           # from 0: no change is no change (a corpus of one certain tree)
                self._change = 0.0 if objective == self.prev else math.inf
        if self.converged(self.prev, objective):
            self.done = True
        self.prev = objective
