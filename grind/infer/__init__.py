"""Inference algorithms over count vectors: EM, VB, collapsed VB, streaming and
stochastic VB, samplers, logistic-normal priors, mixtures, committees; and the
training driver."""

#: The algorithm names (``grind train --algo``), in the order of
#: :data:`grind.infer.registry.ALGORITHMS` (the classes; importing them loads SciPy).
from grind.infer.options import NAMES  # noqa: E402,F401
#: Algorithms that make random choices (samplers, CVB's sweep order, stochastic VB's epoch order): a run of
#: one without a seed draws one and records it (``grind train``, ``grind.fit``).
RANDOM_ALGOS = ("cvb", "gibbs", "hastings", "stochastic")


def __getattr__(name):
    # The algorithm table imports every algorithm (SciPy among them): only on demand.
    if name in ("ALGORITHMS", "CONFIG_OF"):
        from grind.infer import registry
        return getattr(registry, name)
    raise AttributeError(f"module 'grind.infer' has no attribute {name!r}")
