"""Executors run the cells of a benchmark grid: in this process, in a process pool, or on Ray.

An executor maps a picklable function over items and yields results as they finish, so the
grid can write each row the moment it is ready (and a killed run loses at most the cells in
flight). On Ctrl-C the process pool's workers are stopped at once (they ignore SIGINT
themselves, so the terminal shows one message, not a traceback per worker).
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class ExecutorError(RuntimeError):
    """An executor cannot be created (unknown name, bad worker count, Ray missing)."""


class Executor(Protocol):
    """Runs ``fn`` over ``items``; yields ``(item, result)`` pairs in completion order."""

    name: str

    def map_unordered(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[tuple[T, R]]: ...


class LocalExecutor:
    """Runs every item in this process, one after the other (the default)."""

    name = "local"

    def map_unordered(self, fn, items):
        for item in items:
            yield item, fn(item)


class ProcessExecutor:
    """Runs items in a pool of ``workers`` processes (spawned, so torch threads stay sane).

    Timing columns (fps) measured under a pool share the cores with the other workers: use
    the local executor for speed numbers you intend to quote.
    """

    name = "process"

    def __init__(self, workers: int = 2):
        if workers < 1:
            raise ExecutorError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def map_unordered(self, fn, items):
        items = list(items)
        if not items:
            return
        context = multiprocessing.get_context("spawn")
        pool = context.Pool(min(self.workers, len(items)), initializer=_ignore_sigint)
        try:
            yield from pool.imap_unordered(_Paired(fn), items)
            pool.close()
        finally:
            pool.terminate()  # at once on Ctrl-C or an error; a no-op after close() and join
            pool.join()


def _ignore_sigint() -> None:
    """Pool initializer: Ctrl-C is the parent's business (it stops the pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Paired:
    """Picklable ``item -> (item, fn(item))``."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, item):
        return item, self.fn(item)


class RayExecutor:
    """Runs items as Ray tasks, for grids that outgrow one machine.

    Needs ``pip install ray``; connects to ``address`` (default: a local Ray instance, or the
    cluster named by ``RAY_ADDRESS``).
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus_per_task: float = 1.0):
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise ExecutorError(
                "the ray executor needs Ray: `pip install ray`, then start or name a cluster "
                "(RAY_ADDRESS); or use --executor local|process"
            ) from exc
        self.address = address
        self.num_cpus_per_task = num_cpus_per_task

    def map_unordered(self, fn, items):
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True)
        remote = ray.remote(num_cpus=self.num_cpus_per_task)(fn)
        pending = {remote.remote(item): item for item in items}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)


EXECUTORS: dict[str, type] = {
    "local": LocalExecutor,
    "process": ProcessExecutor,
    "ray": RayExecutor,
}


def create_executor(name: str, workers: int = 2) -> Executor:
    """``local``, ``process`` (with ``workers``) or ``ray``."""
    if name not in EXECUTORS:
        raise ExecutorError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")
    if name == "process":
        return ProcessExecutor(workers)
    return EXECUTORS[name]()
