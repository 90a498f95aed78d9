"""Shared fixtures: the shipped EWT sample, ../shared/data (tests skip without it), a CLI runner."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "ewt"
SHARED = Path(os.environ.get("GRIND_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def ewt_train():
    return str(SAMPLE / "en_ewt-ud-train-sample.conllu.gz")


@pytest.fixture
def ewt_test():
    return str(SAMPLE / "en_ewt-ud-test-sample.conllu.gz")


def shared_path(*parts) -> Path:
    """A file under ../shared/data, or skip the test when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def grind(*args, stdin: str | None = None, check: bool = True, cwd=None):
    """Run the grind CLI in a subprocess; returns CompletedProcess (text)."""
    r = subprocess.run([sys.executable, "-m", "grind.cli", *map(str, args)], input=stdin,
                       capture_output=True, text=True, cwd=cwd)
    if check and r.returncode != 0:
        raise AssertionError(f"grind {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r


def sample_dmv(directory: Path, corpus_options) -> tuple[Path, str]:
    """A DMV grammar over the shipped EWT train sample with its harmonic
    initialisation: writes ``g0.txt`` (uniform) and ``g1.txt`` (harmonic) into
    ``directory``; returns (directory, train sample path)."""
    train = str(SAMPLE / "en_ewt-ud-train-sample.conllu.gz")
    grind("make-grammar", "dmv", *corpus_options, "-o", directory / "g0.txt", train)
    grind("init", "--harmonic", "--corpus", train, *corpus_options, "-o", directory / "g1.txt", directory / "g0.txt")
    return directory, train


def remote_shards(build, shard: int):
    """A stand-in for the Dask E-step (``remote``): a ShardedEstep over ``build()``'s parser whose
    ``map_shards`` runs each shard's work on a parser built again (as a worker builds one) with a
    pickled copy of the payload, in reverse shard order; the results come back in shard order;
    ``calls`` counts the calls."""
    import pickle

    from grind.infer.training import ShardedEstep

    class RemoteShards(ShardedEstep):
        remote = True
        calls = 0

        def map_shards(self, fn, payload, idx=None, size=None):
            shards = self.shards(idx, size)
            self.calls += 1
            out = {k: fn(build(), s, pickle.loads(pickle.dumps(payload))) for k, s in reversed(list(enumerate(shards)))}
            return [out[k] for k in range(len(shards))]

    return RemoteShards(build(), shard=shard)
