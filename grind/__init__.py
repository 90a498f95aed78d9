"""grind: unsupervised grammar induction with Bayesian probabilistic grammars."""

__version__ = "0.1.0"
