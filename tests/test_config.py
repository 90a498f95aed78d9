"""Typed configuration: every algorithm option is declared once, in its
config dataclass, and ``grind train``'s click options agree with it."""
from __future__ import annotations

import dataclasses
import inspect
import re

import click

from grind.cli.train import ALGORITHMS as NAMES, train
from grind.infer.config import TrainConfig
from grind.infer.registry import ALGORITHMS, CONFIG_OF

#: Options whose click default is None, meaning "the algorithm's default" (it differs per algorithm).
PER_ALGORITHM = {"iterations", "tolerance", "tie_warmup"}


def click_params():
    return {p.name: p for p in train.params if isinstance(p, click.Option)}


def test_the_table_is_the_cli_table():
    assert list(ALGORITHMS) == list(NAMES)
    for name, cls in ALGORITHMS.items():
        assert cls.name == name
        assert issubclass(cls.Config, TrainConfig) and CONFIG_OF[name] is cls.Config


def _range(t):
    if isinstance(t, (click.IntRange, click.FloatRange)):
        return (t.min, t.max)
    return None


def test_click_defaults_and_ranges_are_the_dataclasses():
    opts = click_params()
    checked = 0
    for name, cfg in CONFIG_OF.items():
        for f in dataclasses.fields(cfg):
            if f.name not in opts:
                continue
            p = opts[f.name]
            default = p.get_default(click.Context(train), call=False)
            checked += 1
            if f.name in PER_ALGORITHM:
                assert default is None, f"--{f.name}: default None (the algorithm's)"
                shown = p.get_help_record(click.Context(train))[1]        # the help line, default included
                assert "default" in shown, f"--{f.name}: the help must say what the default is"
            elif isinstance(p.type, click.Choice):
                assert str(default) == str(f.default), (name, f.name)
                if "choices" in f.metadata:
                    assert {str(c) for c in f.metadata["choices"]} == set(p.type.choices), (name, f.name)
            else:
                assert default == f.default, (name, f.name, default, f.default)
            lo_hi = f.metadata.get("range")
            if lo_hi is not None or _range(p.type) is not None:
                got = _range(p.type)
                assert got is not None and tuple(float(x) if x is not None else None for x in got) == \
                    tuple(float(x) if x is not None else None for x in lo_hi), (name, f.name, got, lo_hi)
    assert checked > 30


def test_algorithms_read_only_their_fields():
    for name, cls in ALGORITHMS.items():
        fields = set(cls.Config.names())
        src = inspect.getsource(inspect.getmodule(cls))
        read = set(re.findall(r"\bcfg\.(\w+)", src)) - {"of", "names", "from_options"}
        assert read <= fields, f"{name} reads {sorted(read - fields)} outside {cls.Config.__name__}"
        assert "getattr(cfg" not in src, f"{name}: getattr default outside its config"


def test_special_defaults_live_in_the_dataclasses():
    from grind.infer.ln import LN_ITERATIONS, LN_TOLERANCE, TIE_WARMUP, LNConfig
    from grind.infer.mixture import MIX_ITERATIONS, MixtureConfig
    assert (LNConfig().iterations, LNConfig().tolerance) == (LN_ITERATIONS, LN_TOLERANCE)
    assert MixtureConfig().iterations == MIX_ITERATIONS
    assert LNConfig.from_options({"tie": "A", "tie_warmup": None}).tie_warmup == TIE_WARMUP
    assert LNConfig.from_options({"tie": "A", "tie_warmup": 0}).tie_warmup == 0
    assert LNConfig.from_options({"iterations": None, "tolerance": 1e-3}).iterations == LN_ITERATIONS
