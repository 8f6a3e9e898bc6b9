"""The controlled loop: one callback per step, chosen lanes, virtual time, deadlock/livelock, guardrails."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import itertools
import os
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

import pytest

from pytest_fake_mcp._race import (
    ControlledLoop,
    Deadlock,
    FifoChooser,
    Livelock,
    NondeterminismError,
    PriorityChooser,
    run_controlled,
)
from pytest_fake_mcp._race._run import cancel_in_order

# --- virtual time --------------------------------------------------------------------------------------


def test_virtual_time_jumps_only_when_nothing_can_run() -> None:
    async def main() -> str:
        await asyncio.sleep(3600)
        async with asyncio.timeout(5):
            await asyncio.sleep(1)
        return "done"

    started = time.perf_counter()
    result = run_controlled(main)
    assert (result.value, result.error, result.virtual_time) == ("done", None, 3601.0)
    assert time.perf_counter() - started < 1.0


def test_asyncio_timeout_fires_on_virtual_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(30):
                await asyncio.Event().wait()
        return loop.time()

    assert run_controlled(main).value == 30.0


def test_timers_fire_in_deadline_order() -> None:
    order: list[int] = []

    async def sleeper(n: int) -> None:
        await asyncio.sleep(n / 10)
        order.append(n)

    async def main() -> None:
        await asyncio.gather(*(sleeper(n) for n in (3, 1, 2)))

    run_controlled(main)
    assert order == [1, 2, 3]


# --- deadlock and livelock ----------------------------------------------------------------------------


def test_deadlock_is_reported_with_the_waiting_tasks() -> None:
    async def main() -> None:
        lock = asyncio.Lock()
        await lock.acquire()

        async def waiter() -> None:
            async with lock:
                pass

        await asyncio.create_task(waiter(), name="waiter")

    result = run_controlled(main)
    assert isinstance(result.error, Deadlock)
    assert "waiter waiting at test_loop.py" in str(result.error)
    assert "main waiting at test_loop.py" in str(result.error)


def test_no_deadlock_when_the_run_finishes() -> None:
    async def main() -> int:
        event = asyncio.Event()
        asyncio.get_running_loop().call_soon(event.set)
        await event.wait()
        return 1

    assert run_controlled(main).error is None


def test_livelock_past_the_step_budget_is_reported() -> None:
    async def main() -> None:
        while True:  # noqa: ASYNC110 - the livelock under test
            await asyncio.sleep(0)

    result = run_controlled(main, max_steps=500)
    assert isinstance(result.error, Livelock)
    assert "more than 500 steps" in str(result.error)


def test_livelock_past_the_virtual_time_budget_is_reported() -> None:
    async def main() -> None:
        while True:  # noqa: ASYNC110 - the livelock under test
            await asyncio.sleep(60)

    result = run_controlled(main, max_virtual_time=600)
    assert isinstance(result.error, Livelock)
    assert "virtual time" in str(result.error)


class _AlwaysLast:
    """The most unfair chooser: always the last lane (a self-rescheduling callback would starve the rest)."""

    def __call__(self, decision: int, seqs: Any) -> int:
        return len(seqs) - 1


def test_bounded_unfairness_lets_a_starved_lane_run() -> None:
    async def main() -> str:
        loop = asyncio.get_running_loop()
        stop = False

        def spin() -> None:  # re-schedules itself for ever, like anyio's cancellation delivery
            if not stop:
                loop.call_soon(spin)

        loop.call_soon(spin)

        async def worker() -> None:
            nonlocal stop
            for _ in range(5):
                await asyncio.sleep(0)
            stop = True

        await asyncio.create_task(worker())
        return "finished"

    result = run_controlled(main, _AlwaysLast(), max_steps=20_000)
    assert (result.value, result.error) == ("finished", None)


def test_anyio_cancellation_under_an_unfair_chooser_does_not_livelock() -> None:
    anyio = pytest.importorskip("anyio")

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(anyio.sleep_forever)
            await asyncio.sleep(0)
            tg.cancel_scope.cancel()
        return "cancelled"

    result = run_controlled(main, _AlwaysLast(), max_steps=20_000)
    assert (result.value, result.error) == ("cancelled", None)


# --- determinism ----------------------------------------------------------------------------------------


def _anyio_scenario() -> Any:
    import anyio

    order: list[str] = []

    async def worker(name: str) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            order.append(name)

    async def main() -> list[str]:
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(worker, f"w{i}")
            await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()  # delivered by iterating a set of tasks: address order
        return order

    return main


def test_anyio_set_ordered_cancellation_replays_identically() -> None:
    pytest.importorskip("anyio")
    runs = []
    for _ in range(20):
        garbage = [object() for _ in range(50)]  # shift allocation addresses between runs
        result = run_controlled(_anyio_scenario(), PriorityChooser([0, 2, 1, 3, 0, 2], [4]))
        runs.append((tuple(result.value), tuple(result.trace)))
        del garbage
    assert len(set(runs)) == 1


def _trace_digest_in_subprocess(hash_seed: str) -> str:
    code = (
        "import hashlib, sys; sys.path.insert(0, 'tests');"
        "from test_loop import _anyio_scenario;"
        "from pytest_fake_mcp._race import run_controlled, PriorityChooser;"
        "r = run_controlled(_anyio_scenario(), PriorityChooser([0, 2, 1, 3, 0, 2], [4]));"
        "print(hashlib.sha256(repr((r.value, r.trace)).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_traces_are_identical_across_processes_and_hash_seeds() -> None:
    pytest.importorskip("anyio")
    assert _trace_digest_in_subprocess("11") == _trace_digest_in_subprocess("22")


def _cancel_in_order(order: tuple[int, ...]) -> Any:
    """Three tasks wait on futures that also carry a plain callback; one step cancels them in ``order``."""

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        futures = [loop.create_future() for _ in range(3)]
        for i, future in enumerate(futures):
            future.add_done_callback(lambda _, i=i: seen.append(f"callback {i}"))  # like shield's outer callback

        async def waiter(i: int) -> None:
            try:
                await futures[i]
            except asyncio.CancelledError:
                seen.append(f"task {i}")

        tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
        await asyncio.sleep(0)
        for i in order:  # as anyio does when it cancels a scope: in the order of a set
            tasks[i].cancel()
        await asyncio.gather(*tasks)
        return seen

    return main


@pytest.mark.parametrize("chooser", [FifoChooser(), PriorityChooser([0, 1, 3, 2])], ids=["fifo", "priorities"])
def test_callbacks_readied_in_one_step_run_in_one_order_whatever_order_readied_them(chooser: Any) -> None:
    runs = {order: run_controlled(_cancel_in_order(order), chooser) for order in itertools.permutations(range(3))}
    assert len({(tuple(r.value), tuple(r.trace)) for r in runs.values()}) == 1, {o: r.value for o, r in runs.items()}
    if isinstance(
        chooser, FifoChooser
    ):  # the one order is stock asyncio's when the tasks are cancelled in creation order
        assert runs[0, 1, 2].value == asyncio.run(_cancel_in_order((0, 1, 2))())


def test_a_lone_wake_up_keeps_stock_asyncios_order_among_plain_callbacks() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        future = loop.create_future()

        async def waiter() -> None:
            await future
            seen.append("task")

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        loop.call_soon(seen.append, "before")
        future.set_result(None)
        loop.call_soon(seen.append, "after")
        await task
        return seen

    assert run_controlled(main).value == asyncio.run(main()) == ["before", "task", "after"]


def test_gc_is_off_during_a_run_and_restored_after() -> None:
    async def main() -> bool:
        return gc.isenabled()

    was = gc.isenabled()
    assert run_controlled(main).value is False
    assert gc.isenabled() == was


# --- the chooser -----------------------------------------------------------------------------------------


async def _two_callers() -> list[str]:
    order: list[str] = []

    async def caller(name: str) -> None:
        for i in range(3):
            order.append(f"{name}{i}")
            await asyncio.sleep(0)

    await asyncio.gather(asyncio.create_task(caller("a"), name="a"), asyncio.create_task(caller("b"), name="b"))
    return order


def test_priority_chooser_runs_the_highest_priority_task_first() -> None:
    fifo = run_controlled(_two_callers)
    ranked = run_controlled(_two_callers, PriorityChooser([0, 0, 1]))  # main, a, b: b outranks a
    assert fifo.value == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert ranked.value == ["b0", "b1", "b2", "a0", "a1", "a2"]
    assert ranked.deviations
    assert "b" in str(ranked.deviations[0])


def test_a_change_point_demotes_the_task_about_to_run() -> None:
    result = run_controlled(_two_callers, PriorityChooser([], [1]))
    assert result.value != run_controlled(_two_callers).value
    assert result.deviation_count > 0


def test_empty_priority_schedule_is_fifo() -> None:
    assert run_controlled(_two_callers, PriorityChooser()).trace == run_controlled(_two_callers, FifoChooser()).trace


def test_a_run_that_is_not_described_counts_its_out_of_order_steps_without_naming_them() -> None:
    described = run_controlled(_two_callers, PriorityChooser([0, 0, 1]))
    counted = run_controlled(_two_callers, PriorityChooser([0, 0, 1]), describe=False)
    assert counted.trace == described.trace
    assert counted.deviation_count == described.deviation_count > 0
    assert described.deviations
    assert counted.deviations == []


class _Asked:
    """Wraps a chooser without its ``fifo_at``: the loop must then work out every lane at every decision."""

    def __init__(self, chooser: Any) -> None:
        self.chooser = chooser

    def __call__(self, decision: int, seqs: Any) -> int:
        return int(self.chooser(decision, seqs))


async def _woken_together() -> list[str]:
    """Tasks woken in one step (an event), beside plain callbacks and a library-free chain of steps."""
    order: list[str] = []
    event = asyncio.Event()

    async def waiter(name: str, turns: int) -> None:
        for _ in range(turns):  # the later-made tasks wait first: the event wakes them against creation order
            await asyncio.sleep(0)
        await event.wait()
        for i in range(3):
            order.append(f"{name}{i}")
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(waiter(name, 3 - i), name=name) for i, name in enumerate("abc")]
    for _ in range(4):
        await asyncio.sleep(0)
    asyncio.get_running_loop().call_soon(order.append, "callback")
    event.set()
    await asyncio.gather(*tasks, _two_callers())
    return order


@pytest.mark.parametrize(
    "make",
    [FifoChooser, lambda: PriorityChooser([], [2, 9]), lambda: PriorityChooser([0, 2, 0, 1], [5])],
    ids=["fifo", "change-points", "priorities"],
)
def test_a_chooser_that_answers_fifo_anyway_is_not_shown_the_lanes_and_the_run_is_the_same(make: Any) -> None:
    quick = run_controlled(_woken_together, make())
    asked = run_controlled(_woken_together, _Asked(make()))
    assert quick.value == asked.value
    assert quick.trace == asked.trace
    assert (quick.decisions, quick.deviation_count) == (asked.decisions, asked.deviation_count)
    assert [str(d) for d in quick.deviations] == [str(d) for d in asked.deviations]


async def _woken_apart_and_by_one_future() -> list[str]:
    """Wake-ups made ready in two steps, the second's by one future awaited against creation order."""
    loop = asyncio.get_running_loop()
    order: list[str] = []
    shared: asyncio.Future[None] = loop.create_future()
    own: asyncio.Future[None] = loop.create_future()

    async def waiter(name: str, turns: int, future: asyncio.Future[None]) -> None:
        for _ in range(turns):  # c awaits the shared future before a: its done callbacks wake c, then a
            await asyncio.sleep(0)
        await future
        for i in range(2):
            order.append(f"{name}{i}")
            await asyncio.sleep(0)

    tasks = [
        asyncio.create_task(waiter("a", 2, shared), name="a"),
        asyncio.create_task(waiter("b", 0, own), name="b"),
        asyncio.create_task(waiter("c", 0, shared), name="c"),
    ]
    for _ in range(4):
        await asyncio.sleep(0)
    own.set_result(None)
    loop.call_soon(shared.set_result, None)  # the next step wakes c and a while b's wake-up still waits
    await asyncio.gather(*tasks)
    return order


@pytest.mark.parametrize("priorities", list(itertools.product([0, 1], repeat=4)), ids=str)
def test_wake_ups_made_ready_apart_or_together_run_as_the_chooser_shown_the_lanes_decides(
    priorities: tuple[int, ...],
) -> None:
    quick = run_controlled(_woken_apart_and_by_one_future, PriorityChooser(priorities))
    asked = run_controlled(_woken_apart_and_by_one_future, _Asked(PriorityChooser(priorities)))
    assert quick.value == asked.value
    assert quick.trace == asked.trace
    assert (quick.decisions, quick.deviation_count) == (asked.decisions, asked.deviation_count)
    assert [str(d) for d in quick.deviations] == [str(d) for d in asked.deviations]


# --- the ready queue's bookkeeping -----------------------------------------------------------------------


def _calls_soon(*, cancel_one: bool) -> Any:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        ran: list[str] = []
        loop.call_soon(ran.append, "kept")
        if cancel_one:
            loop.call_soon(ran.append, "cancelled").cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return ran

    return main


@pytest.mark.parametrize("chooser", [FifoChooser, lambda: PriorityChooser([0, 1, 2])], ids=["fifo", "priority"])
def test_a_callback_cancelled_while_ready_never_runs_and_takes_no_step(chooser: Any) -> None:
    result = run_controlled(_calls_soon(cancel_one=True), chooser())
    assert result.value == ["kept"]
    assert result.trace == run_controlled(_calls_soon(cancel_one=False), chooser()).trace


def test_a_wake_up_cancelled_while_ready_does_not_reorder_the_callbacks_readied_with_it() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        gate = asyncio.Event()
        first = asyncio.ensure_future(gate.wait())
        second = asyncio.ensure_future(gate.wait())
        await asyncio.sleep(0)
        seen: list[int] = []
        # Three callbacks readied in one step, two of them on tasks (as wake-ups are): the later task's is
        # cancelled before it can run, so only one wakes a task and the step's order stays stock asyncio's.
        loop.call_soon(second.get_name).cancel()
        loop.call_soon(lambda: seen.append(first.cancelling()))
        loop.call_soon(first.cancel)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(first, second, return_exceptions=True)
        return seen

    assert run_controlled(main).value == [0] == asyncio.run(main())


def test_a_timer_cancelled_after_it_fell_due_never_runs() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        ran: list[str] = []
        second: list[asyncio.TimerHandle] = []

        def first() -> None:
            ran.append("first")
            second[0].cancel()  # both fell due together: the second already sits in the ready queue

        loop.call_later(0.01, first)
        second.append(loop.call_later(0.01, ran.append, "second"))
        await asyncio.sleep(0.02)  # falls due after both timers (a later deadline), on either loop
        return ran

    assert run_controlled(main).value == ["first"] == asyncio.run(main())


def test_a_task_built_without_the_factory_is_numbered_with_the_step_that_made_it_ready() -> None:
    async def direct() -> None:
        await asyncio.sleep(0)

    async def made() -> None:
        await asyncio.sleep(0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = asyncio.Task(direct(), loop=loop)  # numbered when its step is stamped, after the factory's
        second = loop.create_task(made())
        await asyncio.gather(first, second)

    names = run_controlled(main).task_names
    assert [names[1].split()[-1], names[2].split()[-1]] == [
        "test_a_task_built_without_the_factory_is_numbered_with_the_step_that_made_it_ready.<locals>.made",
        "test_a_task_built_without_the_factory_is_numbered_with_the_step_that_made_it_ready.<locals>.direct",
    ]


def test_task_names_cover_the_teardown_tasks_and_read_the_same_whenever_read() -> None:
    async def child() -> None:
        await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.get_running_loop().create_task(child(), name="given-name")

    here = "test_task_names_cover_the_teardown_tasks_and_read_the_same_whenever_read.<locals>"
    names = run_controlled(main).task_names
    # One name per task, the one the run gave it ("main", "given-name", "drain"), even where create_task names a
    # task once it is built (3.11) and the task is gone when the names are read; a task given no name goes by its
    # creation number and coroutine. The teardown's tasks (the drain, then the closing of async generators) are
    # numbered after the run's own.
    assert names == {
        0: "main",
        1: "given-name",
        2: "drain",
        3: "task #3 BaseEventLoop.shutdown_asyncgens",
    }

    loop = ControlledLoop()
    try:
        task = loop.create_task(child())
        early = loop.names
        assert early == {0: f"task #0 {here}.child"}
        loop.run_until_complete(task)
        assert loop.names is early  # one dict, filled as tasks are numbered
    finally:
        loop.close()


_given: contextvars.ContextVar[str] = contextvars.ContextVar("given", default="unset")


async def _read_given() -> str:
    return _given.get()


def test_create_task_names_a_task_and_runs_it_in_the_context_given_as_stock_asyncio_does() -> None:
    async def main() -> tuple[str, str, str]:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(_given.set, "given")
        named = loop.create_task(_read_given(), name="named")
        in_context = loop.create_task(_read_given(), context=context)
        return named.get_name(), await named, await in_context

    assert run_controlled(main).value == asyncio.run(main()) == ("named", "unset", "given")


def test_create_task_on_a_closed_loop_fails_as_stock_asyncio_does() -> None:
    loop = ControlledLoop()
    loop.close()
    coro = _read_given()
    try:
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.create_task(coro)
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            loop.call_soon_threadsafe(print)
    finally:
        coro.close()


def test_an_async_generator_dropped_unfinished_is_closed_in_a_task_as_stock_asyncio_does() -> None:
    async def main() -> list[str]:
        seen: list[str] = []

        async def numbers() -> Any:
            try:
                yield 1
                yield 2
            finally:
                seen.append("closed")

        agen = numbers()
        seen.append(f"got {await agen.__anext__()}")
        del agen  # finalized now: the loop schedules its aclose() in a task
        seen.append("dropped")
        for _ in range(3):
            await asyncio.sleep(0)
        return seen

    result = run_controlled(main)
    assert result.value == asyncio.run(main()) == ["got 1", "dropped", "closed"]
    assert result.loop_errors == []


def test_a_callback_put_in_the_ready_queue_by_hand_runs_on_the_shared_lane() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        ran: list[str] = []
        loop._ready.append(asyncio.Handle(ran.append, ("by hand",), loop, None))  # type: ignore[attr-defined]
        await asyncio.sleep(0)
        return ran

    result = run_controlled(main)
    assert result.value == ["by hand"]
    assert -1 in result.trace


def test_a_chooser_replaced_between_runs_answers_the_next_run() -> None:
    loop = ControlledLoop(PriorityChooser([0, 0, 1]))
    try:
        assert loop.run_until_complete(loop.create_task(_two_callers())) == ["b0", "b1", "b2", "a0", "a1", "a2"]
        loop.chooser = FifoChooser()
        assert loop.run_until_complete(loop.create_task(_two_callers())) == ["a0", "b0", "a1", "b1", "a2", "b2"]
    finally:
        loop.close()


# --- FIFO mode = stock asyncio -------------------------------------------------------------------------


class _Server:
    def __init__(self) -> None:
        self.initialized = 0
        self.live: set[int] = set()

    async def initialize(self) -> int:
        await asyncio.sleep(0)
        self.initialized += 1
        self.live.add(self.initialized)
        await asyncio.sleep(0)
        return self.initialized

    async def close(self, sid: int) -> None:
        await asyncio.sleep(0)
        self.live.discard(sid)


class _NaiveCache:
    def __init__(self, server: _Server) -> None:
        self.server, self.cache = server, {}  # type: ignore[var-annotated]

    async def get(self, key: str) -> int:
        if key in self.cache:
            return int(self.cache[key])
        sid = await self.server.initialize()
        self.cache[key] = sid
        return sid


class _SingleFlightCache(_NaiveCache):
    def __init__(self, server: _Server) -> None:
        super().__init__(server)
        self.pending: dict[str, asyncio.Task[int]] = {}

    async def get(self, key: str) -> int:
        if key not in self.pending:
            self.pending[key] = asyncio.ensure_future(self.server.initialize())
        return await asyncio.shield(self.pending[key])


class _LockedCache(_NaiveCache):
    def __init__(self, server: _Server) -> None:
        super().__init__(server)
        self.lock = asyncio.Lock()

    async def get(self, key: str) -> int:
        async with self.lock:
            return await super().get(key)


def _cache_scenario(cache_cls: type[_NaiveCache], gap: int, *, cleanup: bool) -> Any:
    async def main() -> tuple[int, int, tuple[int, ...]]:
        server = _Server()
        cache = cache_cls(server)
        a = asyncio.create_task(cache.get("k"))
        for _ in range(gap):
            await asyncio.sleep(0)
        b = asyncio.create_task(cache.get("k"))
        if cleanup:
            await asyncio.sleep(0)
            for sid in list(cache.cache.values()):
                await server.close(sid)
            cache.cache.clear()
        await asyncio.gather(a, b)
        await asyncio.sleep(0.01)  # a timer too: both loops must order it after the ready work
        return server.initialized, len(server.live), tuple(sorted(cache.cache.values()))

    return main


CORPUS = [
    pytest.param(cls, gap, cleanup, id=f"{cls.__name__}-gap{gap}-{'cleanup' if cleanup else 'get'}")
    for cls in (_NaiveCache, _SingleFlightCache, _LockedCache)
    for gap in range(7)
    for cleanup in (False, True)
]


@pytest.mark.parametrize(("cache_cls", "gap", "cleanup"), CORPUS)
def test_fifo_mode_gives_the_same_outcome_as_stock_asyncio(
    cache_cls: type[_NaiveCache], gap: int, cleanup: bool
) -> None:
    stock = asyncio.run(_cache_scenario(cache_cls, gap, cleanup=cleanup)())
    controlled = run_controlled(_cache_scenario(cache_cls, gap, cleanup=cleanup), FifoChooser())
    assert controlled.error is None
    assert controlled.value == stock


def test_fifo_mode_gives_the_same_order_as_stock_asyncio() -> None:
    assert run_controlled(_two_callers).value == asyncio.run(_two_callers())


# --- errors nobody handled -------------------------------------------------------------------------------


def test_an_exception_never_retrieved_is_collected() -> None:
    async def main() -> None:
        async def boom() -> None:
            raise ValueError("lost")

        task = asyncio.create_task(boom(), name="boom")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        del task

    result = run_controlled(main)
    assert any("never retrieved" in line and "lost" in line for line in result.describe_errors())


def test_a_callback_that_raises_is_collected() -> None:
    async def main() -> None:
        asyncio.get_running_loop().call_soon(lambda: 1 / 0)
        await asyncio.sleep(0)

    result = run_controlled(main)
    assert any("ZeroDivisionError" in line for line in result.describe_errors())


def test_a_callback_that_raises_is_reported_as_stock_asyncio_reports_it() -> None:
    def fail(value: int) -> None:
        raise ZeroDivisionError(value)

    async def main() -> None:
        asyncio.get_running_loop().call_soon(fail, 7)
        await asyncio.sleep(0)

    stock: list[dict[str, Any]] = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda _, context: stock.append(context))
        loop.run_until_complete(main())
    finally:
        loop.close()
    [controlled] = run_controlled(main).loop_errors
    [expected] = stock
    assert controlled.keys() == expected.keys()
    assert controlled["message"] == expected["message"]
    assert repr(controlled["exception"]) == repr(expected["exception"]) == "ZeroDivisionError(7)"


def test_a_handled_exception_is_not_collected() -> None:
    async def main() -> None:
        async def boom() -> None:
            raise ValueError("handled")

        with pytest.raises(ValueError, match="handled"):
            await asyncio.create_task(boom())

    assert run_controlled(main).loop_errors == []


def test_the_teardown_closes_the_async_generators_left_open() -> None:
    closed: list[str] = []
    kept: list[Any] = []

    async def numbers(name: str) -> Any:
        try:
            yield 1
            yield 2
        finally:
            await asyncio.sleep(0)  # closing it takes the loop
            closed.append(name)

    async def main() -> None:
        finished = numbers("finished")
        assert [n async for n in finished] == [1, 2]
        left_open = numbers("left open")
        assert await anext(left_open) == 1
        kept.extend([finished, left_open])  # both alive after the run: the teardown meets both

    result = run_controlled(main)
    assert closed == ["finished", "left open"]
    assert result.error is None
    assert result.loop_errors == []
    # A closing task for each generator the run made (asyncio's own shutdown_asyncgens, its public way): the
    # finished one's closes nothing, as `closed` shows.
    assert sum(name.endswith("async_generator_athrow") for name in result.task_names.values()) == 2


def test_tasks_left_pending_are_listed_and_cancelled() -> None:
    forgotten: list[asyncio.Task[None]] = []

    async def main() -> None:
        forgotten.append(asyncio.create_task(asyncio.Event().wait(), name="forgotten"))

    result = run_controlled(main)
    assert [t.split(" waiting")[0] for t in result.leftover_tasks] == ["forgotten"]


# --- guardrails --------------------------------------------------------------------------------------------


def test_a_real_socket_fails_at_once_naming_it() -> None:
    async def main() -> None:
        await asyncio.open_connection("127.0.0.1", 9)

    with pytest.raises(NondeterminismError, match="a real socket"):
        run_controlled(main)


def test_to_thread_fails_at_once_naming_it() -> None:
    async def main() -> None:
        await asyncio.to_thread(time.sleep, 0)

    with pytest.raises(NondeterminismError, match="a thread: run_in_executor"):
        run_controlled(main)


def test_a_dns_lookup_fails_at_once_naming_it() -> None:
    async def main() -> None:
        await asyncio.get_running_loop().getaddrinfo("localhost", 80)

    with pytest.raises(NondeterminismError, match="a DNS lookup of 'localhost'"):
        run_controlled(main)


def test_an_eager_task_factory_fails_at_once_naming_it() -> None:
    def eager_task_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def main() -> None:
        asyncio.get_running_loop().set_task_factory(eager_task_factory)

    with pytest.raises(NondeterminismError, match="eager_task_factory"):
        run_controlled(main)


def test_a_thread_started_during_the_run_fails_naming_it() -> None:
    done = threading.Event()

    async def main() -> None:
        threading.Thread(target=done.set, name="sneaky").start()
        await asyncio.sleep(0)

    try:
        with pytest.raises(NondeterminismError, match="sneaky"):
            run_controlled(main)
    finally:
        assert done.wait(5.0), "the test's thread did not run"
        for thread in threading.enumerate():
            if thread.name == "sneaky":
                thread.join(5.0)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_run_opens_no_file_descriptor() -> None:
    """No selector and no self-pipe: a run waits on nothing real (and call_soon_threadsafe still works)."""
    fds: list[int] = []
    ran: list[str] = []

    async def main() -> None:
        fds.append(len(os.listdir("/proc/self/fd")))
        asyncio.get_running_loop().call_soon_threadsafe(ran.append, "threadsafe")
        await asyncio.sleep(0)

    before = len(os.listdir("/proc/self/fd"))
    run_controlled(main)
    assert fds == [before]
    assert ran == ["threadsafe"]


def test_the_loop_is_closed_after_a_run() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())

    run_controlled(main)
    assert isinstance(loops[0], ControlledLoop)
    assert loops[0].is_closed()


class _Handle:
    """As anyio runs a task group's child: a wrapper coroutine around the function's own."""

    __slots__ = ("_coro",)

    def __init__(self, coro: Any) -> None:
        self._coro = coro

    async def run(self) -> None:
        await self._coro


def test_closing_the_loop_closes_a_task_that_never_ran_so_it_is_not_reported_never_awaited() -> None:
    async def never_runs() -> None:
        return None

    loop = ControlledLoop()
    loop.create_task(never_runs(), name="started during the teardown")
    loop.create_task(_Handle(never_runs()).run(), name="a task group's child started during the teardown")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop.close()
        del loop
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


def test_closing_the_loop_leaves_a_task_that_ran_alone() -> None:
    async def waits(started: asyncio.Event) -> None:
        started.set()
        await asyncio.sleep(3600)

    async def main() -> asyncio.Task[None]:
        started = asyncio.Event()
        task = asyncio.get_running_loop().create_task(waits(started))
        await started.wait()
        return task

    loop = ControlledLoop()
    task = loop.run_until_complete(main())
    coro = task.get_coro()
    loop.close()
    assert inspect.getcoroutinestate(coro) == "CORO_SUSPENDED"  # ran: not ours to close
    coro.close()


def test_the_teardown_lets_a_task_that_has_not_started_start_before_cancelling_it() -> None:
    ran: list[str] = []

    async def child() -> None:
        ran.append("child")
        await asyncio.sleep(3600)

    loop = ControlledLoop()
    try:
        task = loop.create_task(_Handle(child()).run(), name="a task group's child, not started")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cancel_in_order(loop, [task])
            gc.collect()
        assert ran == ["child"]  # it started, then the second round cancelled it
        assert task.cancelled()
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    finally:
        loop.close()


# --- what is code under test --------------------------------------------------------------------------


def test_the_reference_client_cache_and_race_scenarios_are_code_under_test_and_the_fake_is_not() -> None:
    import pytest_fake_mcp._client._cache as cache
    import pytest_fake_mcp._client._reusing as client
    import pytest_fake_mcp._fake._app as app
    import pytest_fake_mcp._race._example_run as example_run
    import pytest_fake_mcp._race._fifo_groups as groups
    import pytest_fake_mcp._race._suite as suite

    for module in (client, cache, example_run, suite):
        assert groups.group_of_file(str(module.__file__)) == groups.USER, module.__name__
    assert groups.group_of_file(str(app.__file__)) == groups.FAKE


def test_code_under_test_named_but_gone_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_fake_mcp._race._fifo_groups as groups

    monkeypatch.setattr(groups, "CODE_UNDER_TEST", (*groups.CODE_UNDER_TEST, "pytest_fake_mcp._moved"))
    groups.code_under_test_files.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match=r"names pytest_fake_mcp\._moved, which is gone"):
            groups.code_under_test_files()
    finally:
        monkeypatch.undo()
        groups.code_under_test_files.cache_clear()
