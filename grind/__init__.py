"""grind: unsupervised grammar induction with Bayesian probabilistic grammars.

``import grind`` is cheap and has no side effects: the Python API
(:mod:`grind.api`: ``grind.read_grammar``, ``grind.read_corpus``,
``grind.fit``, ``grind.parse``, ``grind.evaluate``, ``grind.estep``,
``grind.Counts``, ...) is loaded on first use.  The command line sets its
BLAS thread variables itself (:mod:`grind.cli`).
"""

__version__ = "0.1.0"

#: The Python API, re-exported lazily from :mod:`grind.api`.
__all__ = ["read_grammar", "read_corpus", "fit", "FitResult", "parse", "evaluate", "estep", "Counts", "Grammar",
           "Sentence", "ALGORITHMS", "__version__"]


def __getattr__(name):
    # grind.api is imported on first use (by name, so that importing this
    # package stays cheap and grind.api, which imports grind, makes no cycle).
    if name in __all__:
        import importlib
        value = getattr(importlib.import_module(__name__ + ".api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
