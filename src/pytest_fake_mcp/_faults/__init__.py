"""Scripted faults: what a test makes the fake do wrong, and when.

Two doors. Outward, :class:`FaultControls` is what ``FakeMCPServer`` holds (one per lease): ``on(...)``,
the outages, the ledger and the teardown checks. Inward, :class:`FaultRunner` is the app's request
hooks: it fires the scripted faults and owns all the state they share. Between them:

- ``_scripting``: :class:`FaultControls`, the test's side: ``on(...)``, outages, the ledger, the teardown checks;
- ``_runner``: :class:`FaultRunner`, the app's hooks, owner of held requests, barriers and dropped sessions;
- ``_rule``: the ``on(...)`` builder (:class:`ScriptedFault` and its ``Window``), the one list of actions and counts;
- ``_marker``: the ``fake_mcp_fault`` marker, its parsing and ``--markers`` help derived from the builder;
- ``_before``: the faults that act before the fake's answer (wait, barrier, drop the session);
- ``_instead``: the faults that answer instead of it (a status, a loss shape, a cut, a refusal, silence);
- ``_streaming``: the faults that act while it streams (slow events, cuts after the call, malformed answers);
- ``_resume``: the faults of resumable streams (a cut after the Nth event, a refused or a partial replay);
- ``_auth``: the faults of authorization (tokens expired or refused, a step-up, a refresh or registration refused);
- ``_fault``: the base record and the narrow :class:`Firing` door every fault acts through;
- ``_match``: :class:`RequestMatcher`, which requests a scripted fault is for.
"""

from __future__ import annotations

from ._marker import apply_fault_marker, fault_marker_help
from ._match import ANY, RequestMatcher
from ._rule import ScriptedFault
from ._runner import FaultRunner
from ._scripting import FaultControls, Serving

__all__ = [
    "ANY",
    "FaultControls",
    "FaultRunner",
    "RequestMatcher",
    "ScriptedFault",
    "Serving",
    "apply_fault_marker",
    "fault_marker_help",
]
