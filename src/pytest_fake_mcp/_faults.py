"""Fault records: what a scripted fault does to one request, each overriding ``apply()``.

A record is frozen; the per-request state of a firing lives in :class:`Hit`. Faults that delay,
hold or drop are here; faults that answer the request themselves are in ``_answers.py``; faults
that rewrite or cut the answer as it streams are in ``_taps.py``. Every wait is on the server loop
and can be let go early (teardown, ``restart()``, ``down()``), so nothing leaks into the next test.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from ._gate import Waitable, describe_wait, wait_for
from ._journal import Outcome
from ._protocol import SESSION_HEADER
from ._shapes import SessionLossShape, answer_with_shape

if TYPE_CHECKING:
    from ._app import FakeMCPApp
    from ._request import RequestContext

__all__ = [
    "Barrier",
    "CloseConnection",
    "Delay",
    "DropSession",
    "Fault",
    "Hang",
    "Hit",
    "Release",
    "Reset",
    "ScriptState",
    "bogus_session_id",
    "end_connection",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """Why a held request was let go before its fault was done with it."""

    outcome: Outcome
    reset: bool
    """Reset the TCP connection (else close it cleanly)."""
    why: str


class ScriptState(Protocol):
    """What a firing fault may use of the script that fired it."""

    holds: dict[RequestContext, asyncio.Future[Release]]
    dropped_shapes: dict[str, SessionLossShape]
    undelivered: set[RequestContext]

    def on_answered(self, request: RequestContext, callback: Callable[[], Awaitable[None]]) -> None: ...

    def note(self, text: str) -> None: ...

    async def barrier(self, hit: Hit, parties: int, order: tuple[int, ...] | None, wait_s: float) -> None: ...


class Hit:
    """One scripted fault firing on one request: the request, the app, and helpers to hold or answer it."""

    def __init__(self, request: RequestContext, app: FakeMCPApp, script: ScriptState, rule: object) -> None:
        self.request = request
        self.app = app
        self.script = script
        self.rule = rule

    @property
    def sse(self) -> bool:
        """The fake answers requests as SSE streams (not JSON mode)."""
        return not self.app.options.json_response

    def session_headers(self) -> list[tuple[str, str]]:
        session = self.request.session
        return [(SESSION_HEADER, session.id)] if session is not None and session.live else []

    async def hold(self, condition: Awaitable[Any] | None) -> Release | Literal["done", "disconnected"]:
        """Wait for ``condition`` (None: forever), the client leaving, or an early release."""
        loop = asyncio.get_running_loop()
        release: asyncio.Future[Release] = loop.create_future()
        self.script.holds[self.request] = release
        gone = loop.create_task(self.request.disconnected.wait())
        waiters: set[asyncio.Future[Any]] = {release, gone}
        task = asyncio.ensure_future(condition) if condition is not None else None
        if task is not None:
            waiters.add(task)
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.script.holds.pop(self.request, None)
            for waiter in waiters:
                waiter.cancel()
        if release in done and not release.cancelled():
            return release.result()
        if task is not None and task in done:
            return "done"
        return "disconnected"

    async def give_up(self, release: Release) -> None:
        """End a held request without an answer, as ``release`` says."""
        self.request.end_without_answer(release.outcome)
        self.request.faults.append(release.why)
        await end_connection(self.request, reset=release.reset)


async def end_connection(request: RequestContext, *, reset: bool) -> None:
    """Close the request's TCP connection: a reset (RST) or a clean close (FIN)."""
    transport = request.transport
    if transport is None or transport.is_closing():
        return
    if reset:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Linger 0 makes close() send RST instead of FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        request.abort_connection()
    else:
        transport.close()
    # Let uvicorn see the connection gone before the app returns (else it logs or answers 500).
    for _ in range(2):
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One thing a scripted fault does to a matching request."""

    answers: ClassVar[bool] = False
    """It answers (or ends) the request itself, so nothing can come after it."""

    def fires(self, hit: Hit) -> bool:
        """Whether it acts on this request at all (conditional faults: caps, strict servers)."""
        return True

    async def apply(self, hit: Hit) -> None:
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class Delay(Fault):
    """Wait before the response headers (or until a gate opens)."""

    seconds: float = 0.0
    until: Waitable | None = None

    async def apply(self, hit: Hit) -> None:
        end = await hit.hold(_wait(self.seconds, self.until))
        if isinstance(end, Release):
            await hit.give_up(end)

    def __str__(self) -> str:
        return f"Delay {describe_wait(self.seconds, self.until)}"


async def _wait(seconds: float, until: Waitable | None) -> None:
    if until is not None:
        await wait_for(until)
    if seconds:
        await asyncio.sleep(seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hang(Fault):
    """Accept the request and never answer (let go at teardown: ``Outcome.RELEASED``)."""

    answers: ClassVar[bool] = True

    async def apply(self, hit: Hit) -> None:
        end = await hit.hold(None)
        if isinstance(end, Release):
            await hit.give_up(end)
        else:
            hit.request.end_without_answer(Outcome.DISCONNECTED)

    def __str__(self) -> str:
        return "Hang (accept, never answer)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Barrier(Fault):
    """Hold matching requests until ``parties`` arrived, then let them go together or in ``order``."""

    parties: int
    order: tuple[int, ...] | None = None
    timeout: float = 5.0

    async def apply(self, hit: Hit) -> None:
        await hit.script.barrier(hit, self.parties, self.order, self.timeout)

    def __str__(self) -> str:
        how = "together" if self.order is None else f"in arrival order {list(self.order)}"
        return f"Hold until {self.parties} requests arrived (at most {self.timeout:g}s), then release them {how}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DropSession(Fault):
    """Forget the session the request carries: before answering it (it gets the "unknown" answer), or after."""

    shape: SessionLossShape | None = None
    """How the dropped id is answered from then on; None: as the fake's SDK flavour does (404)."""
    after_answer: bool = False

    def fires(self, hit: Hit) -> bool:
        session = hit.request.session
        return session is not None and session.live

    async def apply(self, hit: Hit) -> None:
        request = hit.request
        session_id = request.session_id
        if session_id is None:  # pragma: no cover - fires() checked there is a live session
            return

        async def drop() -> None:
            hit.app.drop_session(session_id)
            if self.shape is not None:
                hit.script.dropped_shapes[session_id] = self.shape

        if self.after_answer:
            hit.script.on_answered(request, drop)
            return
        await drop()
        if self.shape is not None:
            await answer_with_shape(request, self.shape)

    def __str__(self) -> str:
        text = "Drop the session after answering" if self.after_answer else "Drop the session"
        return text + (f" (its id then answers {self.shape})" if self.shape is not None else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reset(Fault):
    """Reset the TCP connection (RST) before any answer."""

    answers: ClassVar[bool] = True

    async def apply(self, hit: Hit) -> None:
        hit.request.end_without_answer(Outcome.RESET)
        await end_connection(hit.request, reset=True)

    def __str__(self) -> str:
        return "Reset the connection"


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseConnection(Fault):
    """Close the TCP connection cleanly (FIN) before the status line."""

    answers: ClassVar[bool] = True

    async def apply(self, hit: Hit) -> None:
        hit.request.end_without_answer(Outcome.CUT)
        await end_connection(hit.request, reset=False)

    def __str__(self) -> str:
        return "Close the connection before the status line"


def bogus_session_id() -> str:
    return f"bogus{uuid.uuid4().hex[5:]}"
