"""Announcer: the changes a test makes to the catalog mid-test, journaled, and announced as a real server does.

A real SDK server in the handshake era sends ``notifications/tools/list_changed`` (and the resources and prompts
ones) on each session's standalone GET stream, never on a request's stream, and drops it for a session with no
GET stream open; its ``initialize`` capabilities say ``listChanged: true`` only when it was built to announce
(docs/changing-tools.md). With ``list_changed=True`` the fake does the same; without it (the default) a change
takes effect silently, as an ``MCPServer``/``FastMCP`` ``add_tool``/``remove_tool`` does, and the capabilities
are unchanged. Either way each change is a journal event (:func:`change_text`), which the oracles read back
(:func:`parse_change`) to tell a call of a changed or removed tool from one that came after the client relisted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import re
from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._wire._errors import JSONRPCError
from .._wire._protocol import INVALID_PARAMS, Flavour

if TYPE_CHECKING:
    from .._record._journal import Journal, JournalEvent
    from .._wire._options import FakeMCPOptions
    from .._wire._types import JSONObject, JSONValue, SessionId

__all__ = [
    "KINDS",
    "SUBSCRIPTION_ID",
    "Announcer",
    "CatalogChange",
    "How",
    "Kind",
    "Outbox",
    "announce_capabilities",
    "change_text",
    "parse_change",
]

Kind = Literal["tool", "resource", "prompt"]
How = Literal["added", "replaced", "removed"]

KINDS: dict[str, str] = {"tool": "tools", "resource": "resources", "prompt": "prompts"}
"""Each kind of catalog entry and the list (and capability) it belongs to: ``notifications/<list>/list_changed``."""

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
"""The ``_meta`` key stamped on every frame of a ``subscriptions/listen`` stream: the listen request's id."""

_FILTER_KEYS = {"tool": "toolsListChanged", "prompt": "promptsListChanged", "resource": "resourcesListChanged"}
"""Each kind's opt-in flag in a ``subscriptions/listen`` filter (in the order the 2.x server echoes them)."""

_PREFIX = "list change: "
_CHANGE = re.compile(r"^list change: (tool|resource|prompt) (\".*\") (added|replaced|removed)(.*)$")
_LISTENS = re.compile(r" and (\d+) listen streams?\)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogChange:
    """One change of the catalog during a test, read back from the journal."""

    kind: Kind
    name: str
    """The tool's or prompt's name, or the resource's URI."""
    how: How
    after_seq: int
    """The journal number of the last exchange begun before the change (0: before any)."""
    announced: bool
    """Whether the fake sent ``notifications/<list>/list_changed`` for it (``list_changed=True``)."""
    listens: int = 0
    """How many ``subscriptions/listen`` streams (the 2026-07-28 era) carried it."""

    def __str__(self) -> str:
        told = "announced" if self.announced else "not announced"
        return f"{self.kind} {self.name!r} {self.how} after exchange #{self.after_seq} ({told})"


def change_text(kind: Kind, name: str, how: How, streams: int | None, listens: int = 0) -> str:
    """The journal event of a change: ``streams`` is how many GET streams got the notification (None: not sent),
    ``listens`` how many ``subscriptions/listen`` streams."""
    if streams is None:
        told = "not announced: list_changed=False"
    else:
        told = f"announced on {streams} GET stream{'' if streams == 1 else 's'}"
        if listens:
            told += f" and {listens} listen stream{'' if listens == 1 else 's'}"
    return f"{_PREFIX}{kind} {json.dumps(name)} {how} ({told})"


def parse_change(event: JournalEvent) -> CatalogChange | None:
    """The change a journal event records, or None for any other event."""
    if not event.text.startswith(_PREFIX):
        return None
    match = _CHANGE.match(event.text)
    if match is None:
        return None
    kind, name, how, rest = match.groups()
    return CatalogChange(
        kind=kind,  # type: ignore[arg-type]  # the regex admits only the Kind values
        name=str(json.loads(name)),
        how=how,  # type: ignore[arg-type]  # likewise How
        after_seq=event.after_seq,
        announced=rest.startswith(" (announced"),
        listens=int(listened.group(1)) if (listened := _LISTENS.search(rest)) else 0,
    )


class Outbox:
    """Messages waiting to go out on one session's GET stream; ``ready`` is set while any wait."""

    def __init__(self) -> None:
        self._messages: deque[JSONObject] = deque()
        self.ready = asyncio.Event()

    def push(self, message: JSONObject) -> None:
        self._messages.append(message)
        self.ready.set()

    def drain(self) -> list[JSONObject]:
        """Every waiting message, oldest first; ``ready`` is cleared."""
        messages = list(self._messages)
        self._messages.clear()
        self.ready.clear()
        return messages


class Announcer:
    """Journals each catalog change and, with ``list_changed=True``, announces it on every open GET stream.

    Runs on the server loop (``FakeMCPServer`` reaches it through ``Listener.call``).
    """

    def __init__(self, journal: Journal, options: Callable[[], FakeMCPOptions]) -> None:
        self._journal = journal
        self._options = options
        self._outboxes: dict[SessionId, Outbox] = {}
        self._waiters: list[tuple[int, concurrent.futures.Future[None]]] = []
        self._listens: dict[object, tuple[JSONObject, JSONObject, Callable[[JSONObject], None]]] = {}
        """Open ``subscriptions/listen`` streams: (honoured filter, their ``_meta``, how to send on them)."""
        self._ended = asyncio.Event()
        self.unheard: Callable[[JSONObject, Collection[SessionId]], None] | None = None
        """With the event store on: stores a notification for the live sessions with no GET stream open (the
        ``SessionId``s that heard it given), as a real server's store keeps it (``_fake/_standalone.py``)."""

    @property
    def open_streams(self) -> int:
        """How many sessions have a GET stream open now."""
        return len(self._outboxes)

    def when_streams(self, count: int) -> concurrent.futures.Future[None]:
        """A future done once ``count`` GET streams are open at once (any thread or loop may wait on it)."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._waiters.append((count, future))
        self._wake()
        return future

    def _wake(self) -> None:
        waiting = []
        for count, future in self._waiters:
            if len(self._outboxes) >= count or future.cancelled():
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((count, future))
        self._waiters = waiting

    @contextlib.contextmanager
    def stream(self, session_id: SessionId | None) -> Iterator[Outbox | None]:
        """The outbox of a GET stream while it is open (None for a stream with no session)."""
        if session_id is None:
            yield None
            return
        outbox = self._outboxes[session_id] = Outbox()
        self._wake()
        try:
            yield outbox
        finally:
            if self._outboxes.get(session_id) is outbox:
                del self._outboxes[session_id]

    def changed(self, kind: Kind, name: str, how: How) -> None:
        """Note a change of the catalog and, if the fake announces changes, send it on each open GET stream."""
        options = self._options()
        streams: int | None = None
        if options.list_changed:
            message: JSONObject = (
                {"method": f"notifications/{KINDS[kind]}/list_changed", "jsonrpc": "2.0"}
                if options.server_flavour is Flavour.MCP1  # measured: 1.x writes the method first
                else {"jsonrpc": "2.0", "method": f"notifications/{KINDS[kind]}/list_changed"}
            )
            for outbox in self._outboxes.values():
                outbox.push(dict(message))
            streams = len(self._outboxes)
            if self.unheard is not None:
                self.unheard(message, self._outboxes.keys())
        listens = 0
        for honoured, meta, send in self._listens.values():
            if honoured.get(_FILTER_KEYS[kind]) is True:
                method = f"notifications/{KINDS[kind]}/list_changed"
                send({"jsonrpc": "2.0", "method": method, "params": {"_meta": dict(meta)}})
                listens += 1
        self._journal.note(change_text(kind, name, how, streams, listens))

    async def listen(self, request_id: JSONValue, params: JSONObject, send: Callable[[JSONObject], None]) -> JSONObject:
        """Serve one ``subscriptions/listen`` (the 2026-07-28 era, with ``list_changed=True``), as mcp 2.x does:
        acknowledge the honoured filter first, then send each matching change, stamped with the request's id,
        until the client closes the stream (the caller cancels this) or the fake resets (a graceful end: the
        result, stamped alike)."""
        requested = params.get("notifications")
        if not isinstance(requested, dict):
            raise JSONRPCError(INVALID_PARAMS, "Invalid request parameters", "")  # measured, as the 2.x server
        honoured: JSONObject = {key: True for key in _FILTER_KEYS.values() if requested.get(key)}
        uris = requested.get("resourceSubscriptions")
        if isinstance(uris, list) and uris:
            honoured["resourceSubscriptions"] = list(uris)  # honoured, never fired: the fake sends no updates
        meta: JSONObject = {SUBSCRIPTION_ID: request_id}
        acknowledged = {"_meta": dict(meta), "notifications": honoured}
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": acknowledged})
        token = object()
        self._listens[token] = (honoured, meta, send)
        try:
            await self._ended.wait()
        finally:
            del self._listens[token]
        return {"_meta": dict(meta)}

    def end_listens(self) -> None:
        """End every open ``subscriptions/listen`` stream gracefully (the fake resets between tests)."""
        self._ended.set()
        self._ended = asyncio.Event()


def announce_capabilities(capabilities: JSONObject, options: FakeMCPOptions) -> JSONObject:
    """``capabilities`` with ``listChanged: true`` on tools, resources and prompts when the fake announces changes
    (as a low-level SDK ``Server`` run with ``NotificationOptions(tools_changed=True, ...)`` says); unchanged
    otherwise."""
    if not options.list_changed:
        return capabilities
    changed = dict(capabilities)
    for key in KINDS.values():
        entry = changed.get(key)
        if isinstance(entry, dict):
            changed[key] = {**entry, "listChanged": True}
    return changed
