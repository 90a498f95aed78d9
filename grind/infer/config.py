"""Typed training configuration: each algorithm's options as a dataclass
extending :class:`TrainConfig` (the options all algorithms share), made by
:func:`config_class` from the option table :data:`grind.infer.options.OPTIONS`,
where every option is declared once.  Each field has its type, its default
(the algorithm's; ``grind train`` passes None for an option left out, meaning
this default) and ``metadata``: ``help``, the :class:`~grind.infer.options.Opt`
(``option``) and, for numbers, ``range`` = ``(lo, hi)`` (None: open) or ``choices``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import field

from grind.errors import InputError
from grind.infer.options import ALL, readers


def _field(opt, algo=None):
    return field(default=opt.default_for(algo), metadata=opt.metadata())


class _Config:
    """What every configuration does: check its fields, name them, build itself from options."""

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
        the fields' values, None meaning the algorithm's default (or the one an
        option's ``default_with`` gives: ``tie_warmup`` 5 with ``tie``)."""
        cfg = cls._build({n: params[n] for n in cls.names() if n in params})
        for f in dataclasses.fields(cfg):
            opt = f.metadata.get("option")
            if opt is not None and opt.default_with and getattr(cfg, f.name) is None \
                    and getattr(cfg, opt.default_with[0], None):
                setattr(cfg, f.name, opt.default_with[1])
        return cfg

    @classmethod
    def _build(cls, values: dict):
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None or defaults[k] is None})


#: Options every algorithm reads (the batch ones: the iteration cap and the relative-change tolerance of
#: :meth:`grind.infer.base.Algorithm.converged`; the E-step's threads and kernel).
TrainConfig = dataclasses.make_dataclass(
    "TrainConfig", [(o.name, o.type, _field(o)) for o in readers("em") if o.algos == ALL], bases=(_Config,),
    namespace={"__doc__": "Options every algorithm reads: the iteration cap, the relative-change tolerance, "
                          "the E-step's threads and kernel.", "__module__": __name__})


def config_class(name: str, algo: str, doc: str):
    """The configuration dataclass of ``algo``: a :class:`TrainConfig` with the fields of every option of the
    table it reads (:func:`grind.infer.options.readers`), at ``algo``'s defaults."""
    own = [(o.name, o.type, _field(o, algo)) for o in readers(algo)
           if o.algos != ALL or o.default_for(algo) != o.default]
    return dataclasses.make_dataclass(name, own, bases=(TrainConfig,),
                                      namespace={"__doc__": doc, "__module__": _caller_module()})


def _caller_module() -> str:
    import sys
    return sys._getframe(2).f_globals.get("__name__", __name__)
