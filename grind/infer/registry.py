"""The --algo table: name -> algorithm class (see :mod:`grind.infer.base`);
each class's ``Config`` is its typed configuration."""
from __future__ import annotations

from grind.infer.cvb import CVB
from grind.infer.em import EM
from grind.infer.gibbs import Gibbs
from grind.infer.hastings import Hastings
from grind.infer.ln import LogisticNormal
from grind.infer.mixture import Mixture
from grind.infer.stochastic import StochasticVB
from grind.infer.streaming import StreamingVB
from grind.infer.vb import VB

ALGORITHMS = {"em": EM, "vb": VB, "cvb": CVB, "streaming": StreamingVB, "stochastic": StochasticVB,
              "gibbs": Gibbs, "hastings": Hastings, "mixture": Mixture, "ln": LogisticNormal}
#: --algo name -> its config dataclass.
CONFIG_OF = {name: cls.Config for name, cls in ALGORITHMS.items()}

#: Options of every algorithm's that some do not read -> why (``{name}``: another option, named as the
#: caller names options): given, they would do nothing, so grind train and grind.fit refuse them.
_SWEEPS = "a sampler runs its {iterations} sweeps (no convergence test)"
_EPOCHS = "it runs {epochs} passes ({batch_iterations}: the VB iterations of each minibatch)"
_STREAM = "it reads the stream once ({batch_iterations}: the VB iterations of each minibatch)"
_NO_DIRICHLET = "the logistic normal's prior is its mean and covariance ({cov}), not a Dirichlet"
UNREAD = {
    "gibbs": {"tolerance": _SWEEPS},
    "hastings": {"tolerance": _SWEEPS},
    "stochastic": {"tolerance": _EPOCHS, "iterations": _EPOCHS},
    "streaming": {"tolerance": _STREAM, "iterations": _STREAM},
    "ln": {"alpha": _NO_DIRICHLET},
}


def unread_options(algo, cfg, flag=lambda name: name) -> dict:
    """{option name: why ``algo`` does not read it} (mixture: its base's, and schedule I's annealing when the
    schedule is fixed or ``mix_coef`` given); ``flag(name)`` names the other options a reason mentions
    (``--batch-iterations`` for the command line)."""
    names = {n: flag(n) for n in ("iterations", "epochs", "batch_iterations", "cov", "mix_coef")}
    if algo == "mixture":
        from grind.infer.mixture import schedule_name
        out = {}
        if cfg.mix_coef is not None or schedule_name(cfg.mix_schedule) != "I":     # schedule I's annealing only
            why = (f"{names['mix_coef']} fixes the coefficients" if cfg.mix_coef is not None else
                   f"schedule {schedule_name(cfg.mix_schedule)} fixes the mean-field coefficient")
            out.update({n: f"it sets schedule I's annealing, and {why}" for n in ("mix_start", "mix_end", "mix_rate")})
        if cfg.mix_base == "ln":
            out["alpha"] = "the mixture's base is ln: " + _NO_DIRICHLET.format(**names)
            return out
        from grind.infer.config import TrainConfig
        from grind.infer.ln import LNConfig
        out.update({n: f"it is an option of the logistic normal, and the mixture's base is {cfg.mix_base}"
                    for n in sorted(set(LNConfig.names()) - set(TrainConfig.names()))})
        return out
    return {k: why.format(**names) for k, why in UNREAD.get(algo, {}).items()}
