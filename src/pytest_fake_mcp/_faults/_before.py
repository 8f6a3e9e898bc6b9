"""Faults that act before the fake answers: wait, hold at a barrier, drop the session.

The fake's own answer still runs after them (unless a drop sent a session-loss shape), so other
faults can follow them on the same scripted line.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._fake._gate import Waitable, describe_wait
from .._fake._shapes import SessionLossShape, answer_with_shape
from ._fault import Fault, Firing, Release, wait

__all__ = ["Barrier", "CacheHintFault", "Delay", "DiscoverVersions", "DropSession", "SwitchEra"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Delay(Fault):
    """Wait before the response headers (or until a gate opens)."""

    seconds: float = 0.0
    until: Waitable | None = None

    async def apply(self, firing: Firing) -> None:
        end = await firing.hold(wait(self.seconds, self.until))
        if isinstance(end, Release):
            await firing.give_up(end)

    def __str__(self) -> str:
        return f"Delay {describe_wait(self.seconds, self.until)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Barrier(Fault):
    """Hold matching requests until ``parties`` arrived, then let them go together or in ``order``."""

    parties: int
    order: tuple[int, ...] | None = None
    timeout: float = 5.0

    async def apply(self, firing: Firing) -> None:
        await firing.barrier(self.parties, self.order, wait_s=self.timeout)

    def __str__(self) -> str:
        how = "together" if self.order is None else f"in arrival order {list(self.order)}"
        return f"Hold until {self.parties} requests arrived (at most {self.timeout:g}s), then release them {how}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DropSession(Fault):
    """Forget the session the request carries: before answering it (it gets the "unknown" answer), or after."""

    shape: SessionLossShape | None = None
    """How the dropped id is answered from then on; None: as the fake's SDK flavour does (404)."""
    after_answer: bool = False

    def fires(self, firing: Firing) -> bool:
        session = firing.request.session
        return session is not None and session.live

    async def apply(self, firing: Firing) -> None:
        firing.drop_session(self.shape, after_answer=self.after_answer)
        if self.shape is not None and not self.after_answer:
            await answer_with_shape(firing.request, self.shape)

    def unfit(self, era: str) -> str | None:
        if era == "modern":
            return (
                "the modern era has no session to drop; fail its calls with respond(...) or close_connection(), "
                "or roll the server back with switch_era('handshake')"
            )
        return None

    def __str__(self) -> str:
        text = "Drop the session after answering" if self.after_answer else "Drop the session"
        return text + (f" (its id then answers {self.shape})" if self.shape is not None else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchEra(Fault):
    """Serve another era from this request on (this one included): a server upgraded or rolled back under a client."""

    era: str

    async def apply(self, firing: Firing) -> None:
        firing.switch_era(self.era)

    def __str__(self) -> str:
        return f"Switch the server to era={self.era!r} from here on"


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheHintFault(Fault):
    """Give the request's modern result these ``ttlMs`` / ``cacheScope`` (cacheable results only)."""

    ttl_ms: int
    scope: str = "private"

    async def apply(self, firing: Firing) -> None:
        firing.request.cache_hint = (self.ttl_ms, self.scope)

    def __str__(self) -> str:
        return f"Answer with ttlMs={self.ttl_ms} cacheScope={self.scope!r}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoverVersions(Fault):
    """Make ``server/discover`` name these ``supportedVersions`` (unknown or disjoint ones: a client must cope)."""

    versions: tuple[str, ...]

    async def apply(self, firing: Firing) -> None:
        firing.request.discover_versions = self.versions

    def __str__(self) -> str:
        return f"Answer server/discover with supportedVersions={list(self.versions)}"
