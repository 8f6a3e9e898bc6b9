"""What both suites take of a user's subclass: the client's form and what the client declares.

:class:`ClientForms` is the base of ``SessionReuseSuite`` and ``RaceSuite``: the ``make_client`` and ``open_client``
fixtures (docs/contract.md#client-forms), ``session_policy`` (``"reuse"`` or ``"per_call"``) and ``known_failures``
(strict xfails). It imports pytest, so only the suites' modules load it (``pytest_fake_mcp.client`` does not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import pytest

from ._under_test import ClientOpener, ContractClient, Opened, mark_known_failure

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["ClientForms", "hidden_unless_skipped"]


def hidden_unless_skipped(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """A scenario's frame: hidden from its failures, shown for its skip, which pytest places at the innermost
    frame shown (with none of ours, at asyncio's ``base_events.py``: issue 25)."""
    return not excinfo.errisinstance(pytest.skip.Exception)


class ClientForms:
    """The client forms and declarations both suites accept; subclass a suite, not this."""

    session_policy: ClassVar[str] = "reuse"
    """``"reuse"``: one session serves every call until the server ends it. ``"per_call"``: the client opens (and
    closes) a session for each call by design; the scenarios that need a session to outlive a call skip, saying
    why, and the others expect one session per call, each closed."""
    known_failures: ClassVar[Mapping[str, str]] = {}
    """Scenarios the client is known to fail, each with the reason: ``{"test_x": "why"}`` for every case of a
    scenario, ``{"test_x[restart]": "why"}`` for one case as pytest names it. Each runs as a strict ``xfail``: the
    suite stays green and says what the client gets wrong, and a fix (an XPASS) fails until its entry goes."""

    @pytest.fixture(autouse=True)
    def _known_failure(self, request: pytest.FixtureRequest) -> None:
        """Mark the scenario a strict xfail if ``known_failures`` names it (a name it does not know is refused)."""
        mark_known_failure(self, request)

    @pytest.fixture
    def open_client(self) -> ClientOpener | None:
        """Override (instead of ``make_client``): return a callable that takes the fake's URL and returns an async
        context manager yielding an object with ``call_tool(name, arguments)``, e.g. ``lambda url:
        FrameworkClient(url)`` when the framework's client supports ``async with`` and has that call.
        """
        return None

    @pytest.fixture
    def make_client(self, open_client: ClientOpener | None) -> Callable[[str], ContractClient]:
        """Override: return ``lambda url: YourClient(url)`` (or define ``open_client`` instead)."""
        if open_client is not None:
            return Opened(open_client)  # type: ignore[return-value]
        raise NotImplementedError(
            f"{type(self).__name__} must define a make_client fixture returning a callable that takes the "
            "fake's URL and returns your client, e.g.\n\n    @pytest.fixture\n    def make_client(self):\n"
            "        return lambda url: OurClient(url)\n\nor, for a client opened and closed by `async with`, an "
            "open_client fixture:\n\n    @pytest.fixture\n    def open_client(self):\n"
            "        return lambda url: FrameworkClient(url)\n\n(docs/contract.md#client-forms)"
        )

    def _per_call(self) -> bool:
        if self.session_policy not in ("reuse", "per_call"):
            raise ValueError(
                f"{type(self).__name__}.session_policy = {self.session_policy!r}: use 'reuse' (one session for "
                "every call, the default) or 'per_call' (a session opened and closed for each call)"
            )
        return self.session_policy == "per_call"

    def _skip_if_per_call(self, why: str) -> None:
        """Skip a scenario that needs a session to outlive a call, for a client that declared none does."""
        __tracebackhide__ = hidden_unless_skipped
        if self._per_call():
            pytest.skip(f'{type(self).__name__}.session_policy = "per_call": {why}')
