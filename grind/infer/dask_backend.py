"""The E-step on a Dask cluster (``grind train --cluster local:N | tcp://HOST:PORT``).

:class:`DaskEstep` is a :class:`grind.infer.training.ShardedEstep` whose shards
run as Dask tasks: the same shards of 256 sentences, each a pure function
``(shard of sentence indices, weights) -> (counts, logz)``, reduced on the
client in shard order by :meth:`ShardedEstep.reduce`, so the counts are the
single-process ones bit for bit whatever the number of workers, the order in
which the results arrive, or a task re-run on another worker after a worker
was lost.

The chart parsers hold compiled state (Cython memoryviews, kernel objects)
that does not pickle, so a worker does not receive the parser: it receives a
*recipe* once (a picklable zero-argument callable that builds the parser, e.g.
``functools.partial(make_parser, grammar, sentences, kernel)``, scattered to
every worker at the start) and builds the parser at its first task, keeping
it in a worker-local dict under a key unique to the run (:func:`forget` drops
it at the end).  The weights go to every worker once per E-step call
(``scatter(broadcast=True)``); a task carries only its shard's indices.

Dask is an optional dependency (``pip install 'grind[dask]'``), imported only
here and only when a cluster is asked for.  The workers must run the same
grind (and Python, numpy) as the client; Dask's nanny starts them with one
BLAS thread (``distributed.nanny.pre-spawn-environ``), as the command line
runs, so the CKY kernel's DGEMM sums in the same order too.
"""
from __future__ import annotations

import contextlib
import io
import threading
import uuid
from contextlib import contextmanager

import numpy as np

from grind import log
from grind.errors import GrindError, InputError, raise_if_out_of_memory
from grind.infer.training import SHARD, ShardedEstep, shard_counts

#: What a missing Dask says.
NEEDS_DASK = "--cluster needs Dask: pip install 'grind[dask]'"

# ----------------------------------------------------------------------------- worker side

#: key -> the parser built on this worker (worker-local: one dict per process).
_PARSERS: dict = {}
_BUILDING = threading.Lock()


def _worker_parser(key: str, build):
    """The parser of ``key`` on this worker, built by ``build()`` the first time."""
    parser = _PARSERS.get(key)
    if parser is None:
        with _BUILDING:
            parser = _PARSERS.get(key)
            if parser is None:
                # the client has shown the build's messages already
                with contextlib.redirect_stderr(io.StringIO()):
                    parser = build()
                _PARSERS[key] = parser
    return parser


def shard_estep(idx, weights, parser_key: str, build):
    """One shard's ``(counts, logz)`` or, for a large grammar, ``(rules, values,
    logz)`` (:func:`grind.infer.training.shard_counts`): the task every worker
    runs (a pure function of the shard, the weights and the parser the recipe builds)."""
    return shard_counts(_worker_parser(parser_key, build), weights, idx)


def shard_apply(idx, fn, payload, parser_key: str, build):
    """``fn(parser, idx, payload)`` on the worker's parser: an algorithm's own E-step work for one
    shard (:meth:`DaskEstep.map_shards`; ``fn`` a module-level function, ``payload`` picklable)."""
    return fn(_worker_parser(parser_key, build), idx, payload)


def worker_check(key: str, build):
    """``(sentences, sorted failure indices)`` of the worker's parser: the client checks them against its own."""
    parser = _worker_parser(key, build)
    return len(parser.sentences), sorted(parser.failures)


def forget(key: str) -> bool:
    """Drop the worker's parser of ``key``; True when there was one."""
    return _PARSERS.pop(key, None) is not None


def build_joint(grammar, builds):
    """A :class:`grind.infer.sln.JointParser` over the parsers ``builds`` build (a recipe for ``ln --joint``)."""
    from grind.infer.sln import JointParser
    return JointParser(grammar, [b() for b in builds])


# ----------------------------------------------------------------------------- client side

def parse_cluster(spec: str) -> tuple:
    """``("local", N)`` for ``local:N``, ``("address", spec)`` for ``tcp://HOST:PORT``;
    ValueError with the reason otherwise."""
    if spec.startswith("local:"):
        n = spec[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"local:N needs a number of workers N >= 1, not {n!r}")
        return "local", int(n)
    if spec.startswith("tcp://"):
        host, _, port = spec[len("tcp://"):].rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{spec!r} is not tcp://HOST:PORT")
        return "address", spec
    raise ValueError(f"{spec!r} is neither local:N nor tcp://HOST:PORT")


def require_dask():
    """Import Dask's client (InputError naming the extra to install when it is absent)."""
    try:
        import distributed
    except ImportError as e:
        raise_if_out_of_memory(e, "Dask")
        raise InputError(NEEDS_DASK) from None
    return distributed


@contextmanager
def dask_client(spec: str):
    """A connected ``distributed.Client`` for ``spec`` (see :func:`parse_cluster`),
    closed at the end; ``local:N`` starts ``LocalCluster(n_workers=N,
    threads_per_worker=1, processes=True)`` and shuts it down at the end."""
    kind, value = parse_cluster(spec)
    distributed = require_dask()
    cluster = None
    try:
        if kind == "local":
            with _workers_ignore_sigint():
                cluster = distributed.LocalCluster(n_workers=value, threads_per_worker=1, processes=True,
                                                   dashboard_address=None)
            client = distributed.Client(cluster)
        else:
            client = distributed.Client(value)
    except OSError as e:
        if cluster is not None:
            cluster.close()
        raise InputError(f"--cluster {spec}: cannot {'start' if kind == 'local' else 'connect to'} the "
                         f"Dask cluster: {e}") from None
    try:
        if not client.nthreads():
            log.info(f"Dask cluster {spec}: no worker yet; the E-step waits until workers join")
        yield client
    except BaseException:
        _quiet_dask()
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@contextmanager
def _workers_ignore_sigint():
    """Worker processes started in here ignore SIGINT (Python installs no KeyboardInterrupt handler
    where SIGINT was ignored at its start): a Ctrl-C at the terminal stops the grind process, which
    shuts its local cluster down, instead of every worker printing a KeyboardInterrupt traceback."""
    import signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _quiet_dask() -> None:
    """A run stopped by an error or a signal: the cluster's shutdown (cancelled tasks, lost workers,
    futures never retrieved) is logged no more; grind says why it stopped."""
    import logging
    for name in ("distributed", "asyncio", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _gather(client, futures) -> list:
    """The futures' results in their order; a failure of the cluster (a lost
    worker, a worker without grind) is a one-line error, grind's own errors pass."""
    try:
        return client.gather(futures)
    except GrindError:
        raise
    except Exception as e:        # whatever the workers raised, as one line
        raise InputError(f"the Dask cluster failed: {type(e).__name__}: {e}") from None


class DaskEstep(ShardedEstep):
    """``parser.inside_outside`` over fixed shards on a Dask cluster, summed in shard order.

    ``parser`` is the client's parser (the algorithms read its sentences and
    failures, and it cuts the shards); ``build`` a picklable zero-argument
    callable that builds the same parser on a worker; ``client`` a connected
    ``distributed.Client``.  Call :meth:`close` (or use it as a context
    manager) to drop the workers' parsers.
    """

    def __init__(self, parser, build, client, shard: int = SHARD):
        super().__init__(parser, 1, shard)
        self.client, self.key = client, f"grind-parser-{uuid.uuid4().hex}"
        self.build = build
        self._build = client.scatter(build, broadcast=True, hash=False)
        self.calls = 0

    def _recipe(self):
        """The scattered recipe; scattered again when every worker that held it
        is gone (e.g. batch jobs that reached their wall time, replaced by new ones)."""
        if self._build is None or self._build.status != "finished":
            self._build = self.client.scatter(self.build, broadcast=True, hash=False)
        return self._build

    def check(self) -> int:
        """Build the parser on every worker there is now and check that it has
        the client's sentences and failures (InputError otherwise: the worker
        runs another grind); returns the number of workers checked.  Workers
        that join later build theirs at their first task."""
        workers = list(self.client.nthreads())
        futures = [self.client.submit(worker_check, self.key, self._recipe(), workers=[w], allow_other_workers=False,
                                      key=f"{self.key}-check-{k}", pure=False) for k, w in enumerate(workers)]
        got = _gather(self.client, futures)
        want = (len(self.parser.sentences), sorted(self.parser.failures))
        for w, (n, failures) in zip(workers, got):
            if (n, list(failures)) != want:
                raise InputError(f"Dask worker {w} built a parser of {n} sentences ({len(failures)} without a "
                                 f"parse), this process's has {want[0]} ({len(want[1])}): the worker runs another "
                                 "grind or reads other data")
        return len(workers)

    def __call__(self, weights, idx=None):
        shards = self.shards(idx)
        w = self.client.scatter(np.asarray(weights, dtype=np.float64), broadcast=True, hash=False)
        self.calls += 1
        futures = self.client.map(shard_estep, shards, weights=w, key=[f"{self.key}-{self.calls}-{k}"
                                                                         for k in range(len(shards))],
                                  parser_key=self.key, build=self._recipe())
        parts = _gather(self.client, futures)        # in shard order, whatever the arrival order
        del futures, w                               # the workers may drop the weights and the results
        return self.reduce(parts)

    remote = True

    def map_shards(self, fn, payload, idx=None) -> list:
        """``fn(parser, shard, payload)`` for every shard as Dask tasks (``payload`` sent to every
        worker once), returned in shard order whatever the arrival order."""
        shards = self.shards(idx)
        p = self.client.scatter(payload, broadcast=True, hash=False)
        self.calls += 1
        futures = self.client.map(shard_apply, shards, fn=fn, payload=p,
                                  key=[f"{self.key}-{self.calls}-{k}" for k in range(len(shards))],
                                  parser_key=self.key, build=self._recipe())
        parts = _gather(self.client, futures)
        del futures, p
        return parts

    def close(self):
        """Drop the parser on every worker (a long-lived cluster keeps no state of this run)."""
        with contextlib.suppress(Exception):     # best effort: the cluster may be going down already
            self.client.run(forget, self.key)
        self._build = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
