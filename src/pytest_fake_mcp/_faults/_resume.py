"""Faults of resumable streams (``event_store=True``): a cut after the Nth event, a refused or a partial replay.

``CutAfterEvents`` taps a POST's SSE answer (or a GET stream) and ends it right after its Nth message event: the
method goes on, and the event store keeps what it sends, so a client that resumes with ``Last-Event-ID`` gets the
rest. The two
replay faults act on the GET that resumes (one carrying ``Last-Event-ID``): ``RefuseReplay`` answers it with a
status instead, ``PartialReplay`` lets the replay send ``keep`` events and then ends it at once (clean EOF).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .._fake._events import PRIMING_SINCE
from .._wire._protocol import INVALID_REQUEST
from ._fault import Fault, Firing
from ._instead import Respond
from ._streaming import Tap

if TYPE_CHECKING:
    from .._fake._request import RequestContext
    from .._wire._options import FakeMCPOptions
    from .._wire._types import Message, Send

__all__ = ["CutAfterEvents", "PartialReplay", "RefuseReplay", "is_resume", "refusal"]

_MODERN = "the modern era (2026-07-28) resumes no stream: GET is 405 there"


def is_resume(request: RequestContext) -> bool:
    """A GET that resumes a stream: it carries ``Last-Event-ID``."""
    return request.http_method == "GET" and bool(request.first_headers.get("last-event-id"))


def _is_event(body: bytes) -> bool:
    """A JSON-RPC message event (not a ping comment, not a priming event, not the end of the body)."""
    return b"event: message\r\n" in body


class _EventCountTap(Tap):
    """Passes ``keep`` message events, then ends the answer at once (a POST's priming event goes out first)."""

    def __init__(self, firing: Firing, send: Send, keep: int, *, reset: bool) -> None:
        super().__init__(firing, send)
        self.keep = keep
        self.reset = reset
        self.seen = 0

    async def __call__(self, message: Message) -> None:
        if self.cut:
            self._unrecord(message)
            return
        await super().__call__(message)

    async def on_start(self, message: Message) -> None:
        await self.send(message)
        if self.keep == 0 and not self._primes():
            await self.cut_now(reset=self.reset)

    async def on_body(self, message: Message) -> None:
        body = message.get("body", b"")
        await self.send(message)
        if _is_event(body):
            self.seen += 1
        elif not (self.keep == 0 and body.startswith(b"id: ")):
            return  # a ping, or the end of the body
        if self.seen >= self.keep and message.get("more_body", False):  # (an answer that ended needs no cut)
            await self.cut_now(reset=self.reset)

    def _primes(self) -> bool:
        """A priming event follows the head (a POST's SSE answer at 2025-11-25+ with the event store on)."""
        log = self.firing.request.events
        return log is not None and log.version >= PRIMING_SINCE

    def _unrecord(self, message: Message) -> None:
        """The event ``message`` carries never reaches the client: the journal (and the ledger) say so."""
        if message.get("type") != "http.response.body" or not _is_event(message.get("body", b"")):
            return
        response = self.response_in(message)
        if response is not None:
            self.firing.swallow(response)
            return
        recorded = self.firing.request.response_messages
        if recorded:
            self.firing.request.replace_recorded(recorded[-1], None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CutAfterEvents(Fault):
    """End the SSE answer (a POST's, or the GET stream) after its ``events``-th message event (clean EOF, or
    reset)."""

    events: int
    reset: bool = False

    def fires(self, firing: Firing) -> bool:
        return firing.sse

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _EventCountTap(firing, send, self.events, reset=self.reset))

    def __str__(self) -> str:
        how = "TCP reset" if self.reset else "clean EOF"
        return f"Cut the stream after {self.events} event{'s' * (self.events != 1)} ({how})"

    def unserved(self, options: FakeMCPOptions) -> str | None:
        if options.json_response:
            return "the server answers POSTs as JSON (json_response=True): there is no event to cut after"
        return None

    def unfit(self, era: str) -> str | None:
        return "the modern era resumes no stream; use cut_stream() there" if era == "modern" else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RefuseReplay(Respond):
    """Answer the GET that resumes with ``status`` instead of replaying (500: the SDK's answer without a store)."""

    answers: ClassVar[bool] = True

    def fires(self, firing: Firing) -> bool:
        return is_resume(firing.request)

    def __str__(self) -> str:
        return f"Refuse the replay with {self.status}"

    def unfit(self, era: str) -> str | None:
        return _MODERN if era == "modern" else None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartialReplay(Fault):
    """Replay only the first ``keep`` missed events of the GET that resumes, then end it (clean EOF)."""

    keep: int = 0

    def unserved(self, options: FakeMCPOptions) -> str | None:
        if options.event_store:
            return None
        return (
            "without an event store there is no replay to break off (a resume gets 500): switch it on with "
            "@pytest.mark.fake_mcp_server(event_store=True) (docs/resumable-streams.md)"
        )

    def fires(self, firing: Firing) -> bool:
        return is_resume(firing.request)

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _EventCountTap(firing, send, self.keep, reset=False))

    def __str__(self) -> str:
        return f"Break the replay off after {self.keep} event{'s' * (self.keep != 1)}"

    def unfit(self, era: str) -> str | None:
        return _MODERN if era == "modern" else None


def refusal(status: int) -> RefuseReplay:
    """The record for ``refuse_replay(status)``: 500 is the SDK's bare text/plain answer, others a JSON-RPC error."""
    if status == 500:
        return RefuseReplay(status=500, body=b"Internal Server Error", jsonrpc_body=False)
    return RefuseReplay(status=status, code=INVALID_REQUEST if status < 500 else None)
