"""Scripted faults: what a test makes the fake do wrong, and when.

Two doors. Outward, :class:`FaultControls` is what ``FakeMCPServer`` holds (one per lease): ``on(...)``,
the outages, the ledger and the teardown checks. Inward, :class:`FaultRunner` is the app's request
hooks: it fires the scripted faults and owns all the state they share. Between them:

- ``_rule``: the ``on(...)`` builder (:class:`ScriptedFault` and its ``Schedule``), the one list of actions and
  counts; ``_marker`` derives the ``fake_mcp_fault`` marker's parsing and help from it;
- ``_before`` / ``_instead`` / ``_streaming``: the fault records, by when they act (before the fake's
  answer, instead of it, or while it streams);
- ``_fault``: the base record and the narrow :class:`Firing` door every fault acts through;
- ``_match``: :class:`RequestMatcher`, which requests a scripted fault is for.
"""

from __future__ import annotations

from ._controls import FaultControls, Serving
from ._marker import apply_fault_marker, fault_marker_help
from ._match import ANY, RequestMatcher
from ._rule import ScriptedFault
from ._runner import FaultRunner

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
