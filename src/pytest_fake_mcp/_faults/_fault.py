"""The fault record every kind of fault extends, and the narrow door it acts through.

A :class:`Fault` is a frozen record that overrides ``apply(firing)``. The :class:`Firing` it gets is
all it may do beyond answering the request itself: hold the request, hand it to a barrier, drop its
session, put a tap on what it streams, give a held request up. The runner implements that door; a
fault never sees the runner or the app, so a new fault is a short class in the module named for when
it acts (``_before``, ``_instead``, ``_streaming``).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from .._fake._gate import Waitable, wait_for
from .._record._journal import Outcome

if TYPE_CHECKING:
    from .._fake._auth import AuthServer
    from .._fake._request import RequestContext
    from .._fake._shapes import SessionLossShape
    from .._wire._options import FakeMCPOptions
    from .._wire._protocol import Flavour
    from .._wire._types import JSONObject, Send

__all__ = ["Fault", "Firing", "Release", "end_connection", "priming_event", "wait"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """Why a held request was let go before its fault was done with it."""

    outcome: Outcome
    reset: bool
    """Reset the TCP connection (else close it cleanly)."""
    why: str


class Firing(Protocol):
    """What a fault may do while it acts on one request; the runner makes one per firing."""

    @property
    def request(self) -> RequestContext:
        """The request it acts on: it may answer it (``respond``, ``start``/``write``) or end it."""

    @property
    def sse(self) -> bool:
        """The answer starts as an SSE stream before the method runs (the handshake era, not in JSON mode)."""

    @property
    def flavour(self) -> Flavour:
        """The SDK line the fake answers as (error bodies differ)."""

    @property
    def auth(self) -> AuthServer | None:
        """The authorization server beside the fake (``auth=True``), or None."""

    def live_sessions(self) -> int:
        """How many sessions are live now."""

    def session_headers(self) -> list[tuple[str, str]]:
        """``Mcp-Session-Id`` of the request's live session, as the fake's own answer would carry it."""

    async def hold(self, condition: Awaitable[Any] | None) -> Release | Literal["done", "disconnected"]:
        """Wait for ``condition`` (None: forever), the client leaving, or an early release."""

    async def give_up(self, release: Release) -> None:
        """End a held request without an answer, as ``release`` says."""

    async def barrier(self, parties: int, order: tuple[int, ...] | None, wait_s: float) -> None:
        """Hold the request with the others at this scripted fault's barrier, then let it go."""

    def drop_session(self, shape: SessionLossShape | None, *, after_answer: bool) -> None:
        """End the request's session now or once it is answered; with a shape, its id answers so from then on."""

    def tap(self, make: Callable[[Send], Send]) -> None:
        """Put ``make(send)`` between the app and the wire for the rest of this request."""

    def switch_era(self, era: str) -> None:
        """Serve ``era`` (``"handshake"``, ``"modern"`` or ``"dual"``) from this request on (a deploy)."""

    def swallow(self, response: JSONObject) -> None:
        """``response`` never reaches the client: it leaves the journal's record and the ledger marks it lost."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One thing a scripted fault does to a matching request."""

    answers: ClassVar[bool] = False
    """It answers (or ends) the request itself, so nothing can come after it."""

    def fires(self, firing: Firing) -> bool:
        """Whether it acts on this request at all (conditional faults: caps, strict servers)."""
        return True

    def unserved(self, options: FakeMCPOptions) -> str | None:
        """Why it can never act on a server with these options (what it needs is off), as a clause; else None."""
        return None

    def unfit(self, era: str) -> str | None:
        """Why it means nothing on a request ``era`` answers (no stream, no session there), as a clause; else None."""
        return None

    async def apply(self, firing: Firing) -> None:
        raise NotImplementedError


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


async def wait(seconds: float, until: Waitable | None) -> None:
    """Wait for ``until`` to open (if given), then ``seconds``."""
    if until is not None:
        await wait_for(until)
    if seconds:
        await asyncio.sleep(seconds)


def priming_event(request: RequestContext) -> bytes:
    """An SDK-style priming event: an ``id:`` (and a short ``retry:``) with empty data."""
    return f"id: {request.seq}-0\r\nretry: 100\r\ndata: \r\n\r\n".encode()
