"""The --algo table: name -> algorithm class (see :mod:`grind.infer.base`);
each class's ``Config`` is its typed configuration (made from :mod:`grind.infer.options`)."""
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

# The options some algorithms do not read (UNREAD, unread_options) are declared with the options.
from grind.infer.options import UNREAD, unread_options  # noqa: E402,F401 (re-exported)
