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
it at the end).  The weights go to the cluster once per E-step call; a task
carries only its shard's indices.  The recipe and the weights are Dask tasks
of their own (:meth:`DaskEstep._value`), not scattered data: a worker lost
with them loses nothing the scheduler cannot make again (a broadcast scatter
waited for its replica on a dead worker forever).

A lost worker: Dask runs its tasks again on the others; a shard whose task
failed with it is submitted again (:data:`SHARD_TRIES`).  The E-step watches
the cluster while it waits (every :data:`POLL` s, so a signal stops the run
at once); once a worker was lost, an E-step that finishes no shard for
:func:`patience` seconds stops the run naming the worker (the run goes on from
its last checkpoint with ``--resume``).  The cluster's shutdown is bounded
(:data:`CLOSE_TIMEOUT`).

Dask is an optional dependency (``pip install 'grind[dask]'``), imported only
here and only when a cluster is asked for.  The workers must run the same
grind (and Python, numpy) as the client; Dask's nanny starts them with one
BLAS thread (``distributed.nanny.pre-spawn-environ``), as the command line
runs, so the CKY kernel's DGEMM sums in the same order too.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
import time
import uuid
import warnings
from contextlib import contextmanager

import numpy as np

from grind import log
from grind.errors import GrindError, InputError, raise_if_out_of_memory
from grind.infer.training import SHARD, ShardedEstep, shard_counts

#: What a missing Dask says.
NEEDS_DASK = "--cluster needs Dask: pip install 'grind[dask]'"
#: Seconds an E-step waits, once a worker was lost, for a shard to finish (at least; longer when E-steps
#: took longer: see :func:`patience`).  The environment variable GRIND_DASK_PATIENCE sets it.
LOST_WORKER_PATIENCE = 60.0
#: Submissions of a shard whose task was lost with a worker (Dask also runs such tasks again itself).
SHARD_TRIES = 3
#: Seconds between two looks at the cluster while an E-step waits.
POLL = 0.5
#: Seconds the client's and a local cluster's shutdown may take.
CLOSE_TIMEOUT = 10

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


def _identity(x):
    """A task whose result is its argument: data the scheduler can make again on another worker."""
    return x


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
            # its processes log only what is critical: a worker lost is grind's to say (DaskEstep.map_shards),
            # not a traceback from each worker that was fetching data from it
            with _workers_ignore_sigint():
                cluster = distributed.LocalCluster(n_workers=value, threads_per_worker=1, processes=True,
                                                   dashboard_address=None, silence_logs=logging.CRITICAL)
            client = distributed.Client(cluster)
        else:
            client = distributed.Client(value)
    except OSError as e:
        if cluster is not None:
            cluster.close()
        raise InputError(f"--cluster {spec}: cannot {'start' if kind == 'local' else 'connect to'} the "
                         f"Dask cluster: {e}") from None
    failed = False
    try:
        if not client.nthreads():
            log.info(f"Dask cluster {spec}: no worker yet; the E-step waits until workers join")
        yield client
    except BaseException:
        failed = True
        _quiet_dask()
        raise
    finally:
        with contextlib.suppress(Exception) if failed else contextlib.nullcontext():   # (the first error is said)
            client.close(timeout=CLOSE_TIMEOUT)
            if cluster is not None:
                cluster.close(timeout=CLOSE_TIMEOUT)


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


def patience(longest: float) -> float:
    """Seconds an E-step may finish no shard once a worker was lost: :data:`LOST_WORKER_PATIENCE` (or
    GRIND_DASK_PATIENCE), or 3 times the longest E-step so far (``longest`` s) when that is more."""
    try:
        base = float(os.environ.get("GRIND_DASK_PATIENCE", LOST_WORKER_PATIENCE))
    except ValueError:
        base = LOST_WORKER_PATIENCE
    return max(base, 3.0 * longest)


def _lost_with_a_worker(e: BaseException) -> bool:
    """Whether a task's failure is its worker's (gone, unreachable), not the task's own."""
    import distributed
    from distributed.comm.core import CommClosedError
    return isinstance(e, (CommClosedError, distributed.KilledWorker, OSError, TimeoutError,
                          distributed.client.FutureCancelledError))


def _cluster_failed(e: BaseException) -> GrindError:
    """A task's error as grind reports it: grind's own errors as they are, anything else in one line."""
    return e if isinstance(e, GrindError) else InputError(f"the Dask cluster failed: {type(e).__name__}: {e}")


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
        self._build = self._value(build)
        self.calls = 0
        self.longest = 0.0               # seconds of the longest E-step call so far
        self.workers = set(client.nthreads())

    def _value(self, obj):
        """A future of ``obj`` that the cluster can make again when the worker holding it is lost
        (a task returning it, the value kept with the task), unlike scattered data."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")            # (Dask's note on large objects in a task)
            return self.client.submit(_identity, obj, pure=False, key=f"{self.key}-data-{uuid.uuid4().hex}")

    def _recipe(self):
        """The recipe's future; submitted again when it failed or was cancelled."""
        if self._build is None or self._build.status in ("error", "cancelled"):
            self._build = self._value(self.build)
        return self._build

    def _collect(self, submit, n: int, what: str = "E-step") -> list:
        """``[submit(k, attempt).result() for k < n]``, waiting while watching the cluster: a shard whose
        task was lost with its worker is submitted again (at most :data:`SHARD_TRIES` times); once a worker
        was lost, no shard finished for :func:`patience` seconds stops the run (InputError naming the
        lost workers and --resume); the task's own errors as :func:`_cluster_failed` says them."""
        t0 = time.monotonic()
        ready = threading.Event()
        tries = dict.fromkeys(range(n), 1)
        pending = {}

        def launch(k):
            f = submit(k, tries[k])
            f.add_done_callback(lambda _: ready.set())
            pending[k] = f

        for k in range(n):
            launch(k)
        out: dict = {}
        lost: list[str] = []
        progress = lost_at = None
        while pending:
            ready.wait(POLL)                 # (returns at the first finished task; a signal is handled here)
            ready.clear()
            now = time.monotonic()
            for k, f in list(pending.items()):
                if f.status == "pending":
                    continue
                try:
                    if f.status == "finished":
                        out[k] = f.result()
                        del pending[k]
                        progress = now
                        continue
                    err = f.exception() if f.status == "error" else ConnectionError(f"its task was {f.status}")
                except Exception as e:      # the result could not be fetched: its worker went away meanwhile
                    err = e
                if not _lost_with_a_worker(err) or tries[k] >= SHARD_TRIES:
                    raise _cluster_failed(err) from None
                tries[k] += 1
                launch(k)
            workers = set(self.client.nthreads())
            gone = sorted(self.workers - workers)
            self.workers = workers
            if gone:
                lost += gone
                lost_at = now
                log.warn(f"{what}: Dask worker(s) {', '.join(gone)} lost; their shards run again on the others")
            waited = now - max(lost_at or now, progress or t0)
            if lost and pending and waited > patience(self.longest):
                raise InputError(f"Dask worker(s) {', '.join(lost)} lost, and no shard of this {what} finished in "
                                 f"the {waited:.0f} s since ({len(pending)} of {n} shards left, "
                                 f"{len(workers)} worker(s) now): stopped; with --checkpoint FILE, --resume goes "
                                 "on from the last checkpoint")
        self.longest = max(self.longest, time.monotonic() - t0)
        return [out[k] for k in range(n)]

    def check(self) -> int:
        """Build the parser on every worker there is now and check that it has
        the client's sentences and failures (InputError otherwise: the worker
        runs another grind); returns the number of workers checked.  Workers
        that join later build theirs at their first task."""
        workers = list(self.client.nthreads())
        got = self._collect(lambda k, t: self.client.submit(
            worker_check, self.key, self._recipe(), workers=[workers[k]], allow_other_workers=t > 1,
            key=f"{self.key}-check-{k}-{t}", pure=False), len(workers), "check of the workers")
        want = (len(self.parser.sentences), sorted(self.parser.failures))
        for w, (n, failures) in zip(workers, got):
            if (n, list(failures)) != want:
                raise InputError(f"Dask worker {w} built a parser of {n} sentences ({len(failures)} without a "
                                 f"parse), this process's has {want[0]} ({len(want[1])}): the worker runs another "
                                 "grind or reads other data")
        return len(workers)

    def __call__(self, weights, idx=None):
        shards = self.shards(idx)
        w = self._value(np.asarray(weights, dtype=np.float64))
        self.calls += 1
        parts = self._collect(lambda k, t: self.client.submit(
            shard_estep, shards[k], weights=w, parser_key=self.key, build=self._recipe(),
            key=f"{self.key}-{self.calls}-{k}-{t}", pure=False), len(shards))   # in shard order
        return self.reduce(parts)

    remote = True

    def map_shards(self, fn, payload, idx=None, size=None) -> list:
        """``fn(parser, shard, payload)`` for every shard (of ``size`` sentences, default
        ``shard``) as Dask tasks (``payload`` sent to every worker once), returned in shard order
        whatever the arrival order."""
        shards = self.shards(idx, size)
        p = self._value(payload)
        self.calls += 1
        parts = self._collect(lambda k, t: self.client.submit(
            shard_apply, shards[k], fn=fn, payload=p, parser_key=self.key, build=self._recipe(),
            key=f"{self.key}-{self.calls}-{k}-{t}", pure=False), len(shards))
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
