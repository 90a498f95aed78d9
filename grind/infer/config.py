"""Typed training configuration: every algorithm declares its options once, as
a dataclass extending :class:`TrainConfig` (the options all batch algorithms
share).  Each field has its type, its default (the algorithm's; ``grind
train`` passes None for an option left out, meaning this default) and
``metadata``: ``help`` and, for numbers, ``range`` = ``(lo, hi)`` (None: open).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from grind.errors import InputError


def option(default, help: str, range: tuple | None = None, choices: tuple | None = None):
    """A config field: ``default``, ``metadata={"help": help, "range": range, "choices": choices}``
    (range and choices only when given)."""
    meta = {"help": help}
    if range is not None:
        meta["range"] = range
    if choices is not None:
        meta["choices"] = tuple(choices)
    return field(default=default, metadata=meta)


@dataclass
class TrainConfig:
    """Options every algorithm reads (the batch ones: the iteration cap and
    the relative-change tolerance of :meth:`grind.infer.base.Algorithm.converged`)."""

    iterations: int = option(50, "Iterations (a cap: the run may converge earlier).", (1, None))
    tolerance: float = option(1e-6, "Stop when the objective's relative change is at most this.", (0, None))
    jobs: int = option(1, "Threads for the E-step (results do not depend on it).", (1, None))
    kernel: str = option("auto", "Chart kernel (streaming builds its own parsers).")

    def __post_init__(self):
        """Every field within its ``range`` and ``choices`` (the command line checks them too; this is for
        the Python API): an InputError naming the field and saying what it is."""
        for f in dataclasses.fields(self):
            v, lo_hi, choices = getattr(self, f.name), f.metadata.get("range"), f.metadata.get("choices")
            if v is None:
                continue
            if choices is not None and str(v) not in map(str, choices):      # the command line gives '1
                raise InputError(f"{f.name} = {v!r}: not one of {', '.join(map(str, choices))} "
                                 f"({f.metadata['help']})")
            if lo_hi is not None:
                lo, hi = lo_hi
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v \
                        or (lo is not None and v < lo) or (hi is not None and v > hi):
                    raise InputError(f"{f.name} = {v!r}: not a number in [{lo}, {'inf' if hi is None else hi}] "
                                     f"({f.metadata['help']})")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, cfg):
        """``cfg`` as this config: an instance is returned as is; any other
        object (another config, a namespace) gives its attributes named like
        fields; missing ones and None (for a field whose default is not None)
        take the default."""
        if type(cfg) is cls:
            return cfg
        return cls._build({n: getattr(cfg, n) for n in cls.names() if hasattr(cfg, n)})

    @classmethod
    def from_options(cls, params: dict):
        """The config from ``grind train``'s click parameters (``ctx.params``):
        the fields' values, None meaning the algorithm's default."""
        return cls._build({n: params[n] for n in cls.names() if n in params})

    @classmethod
    def _build(cls, values: dict):
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None or defaults[k] is None})
