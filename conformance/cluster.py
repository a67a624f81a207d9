"""Where parallel work runs: in this process, in local processes (one per job), or on the workers of
a Dask distributed cluster (``--cluster ADDRESS``, a scheduler's address such as
``tcp://127.0.0.1:8786``). Two shapes of work use it:

- :func:`serve`: long-lived objects, one per worker, whose methods are called in rounds (the model
  checker's :class:`conformance.modelcheck.Partition`); on a cluster each is a Dask actor pinned to
  one worker;
- :func:`map_ordered`: a function over items, the results in the items' order (``dsh-session check``
  over a fleet of logs).

Dask is imported only when a cluster is named: the embedded path needs nothing installed.
"""

from __future__ import annotations

import importlib
import multiprocessing
import pickle
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any, Protocol, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Reply(Protocol):
    def result(self) -> Any: ...


class Server(Protocol):
    """An object somewhere: ``call`` sends a method call and answers at once; the reply's
    ``result()`` waits for its value (one call at a time per server)."""

    def call(self, method: str, *args: object) -> Reply: ...


class _Done:
    def __init__(self, value: object) -> None:
        self.value = value

    def result(self) -> object:
        return self.value


class LocalServer:
    """The object in this process."""

    def __init__(self, target: object) -> None:
        self.target = target

    def call(self, method: str, *args: object) -> Reply:
        return _Done(getattr(self.target, method)(*args))


class WorkerError(RuntimeError):
    """A call failed where it ran; the message holds the remote traceback."""


def _serve(connection: Connection, target: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's: it lets the round end
    while True:
        message = connection.recv()
        if message is None:
            return
        method, args = message
        try:
            connection.send((True, getattr(target, method)(*args)))
        except Exception:  # sent back whole: the caller raises it
            connection.send((False, traceback.format_exc()))


class _Pending:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def result(self) -> object:
        ok, value = self.connection.recv()
        if not ok:
            raise WorkerError(str(value))
        return value


class ProcessServer:
    """The object in a forked process of its own, called through a pipe."""

    def __init__(self, target: object) -> None:
        context = multiprocessing.get_context("fork")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, target), daemon=True)
        self.process.start()
        child.close()

    def call(self, method: str, *args: object) -> Reply:
        self.connection.send((method, args))
        return _Pending(self.connection)

    def close(self) -> None:
        self.connection.send(None)
        self.process.join()


class Hosted:
    """A Dask actor holding an object sent pickled, and calling its methods."""

    def __init__(self, blob: bytes) -> None:
        self.target = pickle.loads(blob)

    def call(self, method: str, args: tuple[object, ...]) -> object:
        return getattr(self.target, method)(*args)


class DaskServer:
    """The object on one Dask worker, as an actor."""

    def __init__(self, client: Any, worker: str, target: object) -> None:
        blob = pickle.dumps(target, pickle.HIGHEST_PROTOCOL)
        self.future = client.submit(Hosted, blob, actor=True, workers=[worker], pure=False)
        self.actor = self.future.result()

    def call(self, method: str, *args: object) -> Reply:
        reply: Reply = self.actor.call(method, args)
        return reply


@contextmanager
def dask_client(address: str) -> Iterator[Any]:
    """A client of the Dask scheduler at ``address``."""
    distributed: Any = importlib.import_module("distributed")  # only a cluster run needs Dask
    client: Any = distributed.Client(address, set_as_default=False)
    try:
        with client.as_current():  # an actor's calls find their client so
            yield client
    finally:
        client.close()


def cluster_workers(client: Any) -> list[str]:
    """The cluster's workers' addresses, in a stable order."""
    return sorted(client.scheduler_info()["workers"])


@contextmanager
def serve(
    build: Callable[[int], Sequence[object]], workers: int = 1, cluster: str | None = None
) -> Iterator[list[Server]]:
    """Servers for the objects ``build(count)`` gives: ``count`` is ``workers`` (one: this process;
    more: a forked process each) or, with ``cluster``, the number of the cluster's workers (an
    actor on each)."""
    if cluster is not None:
        with dask_client(cluster) as client:
            places = cluster_workers(client)
            targets = build(len(places))
            yield [DaskServer(client, place, target) for place, target in zip(places, targets, strict=True)]
        return
    targets = build(workers)
    if len(targets) == 1:
        yield [LocalServer(targets[0])]
        return
    servers = [ProcessServer(target) for target in targets]
    try:
        yield list(servers)
    finally:
        for server in servers:
            server.close()


def map_ordered(
    function: Callable[[Item], Result], items: Sequence[Item], jobs: int = 1, cluster: str | None = None
) -> Iterator[Result]:
    """``function`` over ``items``, in this process (``jobs`` 1), in ``jobs`` local processes or on
    a Dask cluster; the results in the items' order either way."""
    if cluster is not None:
        with dask_client(cluster) as client:
            futures = client.map(function, list(items), pure=False)
            yield from client.gather(futures)
        return
    if jobs <= 1 or len(items) <= 1:
        yield from map(function, items)
        return
    chunk = max(1, len(items) // (jobs * 4))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(function, items, chunksize=chunk)
