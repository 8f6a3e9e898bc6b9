"""The ``fake_mcp_fault`` marker: its parsing and its ``--markers`` help, both derived from the builder.

The builder's methods marked ``@action_step`` / ``@count_step`` are the one list; nothing here names an action.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .._wire._errors import ScriptError
from ._match import RequestMatcher
from ._rule import ScriptedFault, steps_of

__all__ = ["apply_fault_marker", "fault_marker_help"]


def fault_marker_help(builder: type[ScriptedFault] = ScriptedFault) -> str:
    """The ``fake_mcp_fault`` line of ``pytest --markers``."""
    first, *rest = (f.name for f in dataclasses.fields(RequestMatcher))
    counts = steps_of(builder, "count")
    return (
        f"fake_mcp_fault({first}=ANY, *, {', '.join(f'{name}=' for name in [*rest, *counts])}, <action>=value): "
        f"script a fault on this test's fake_mcp_server, as fake_mcp_server.on({first}, ...).<count>.<action>(value); "
        f"actions: {', '.join(steps_of(builder, 'action'))} (docs/faults.md)."
    )


def apply_fault_marker(
    on: Callable[..., ScriptedFault],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    *,
    builder: type[ScriptedFault] = ScriptedFault,
) -> ScriptedFault:
    """Script one ``@pytest.mark.fake_mcp_fault(method, *, <match>, <count>, <action>=value)`` with ``on``.

    An action's value is its argument (``respond=503``, ``delay=0.5``), a dict of keyword
    arguments (``cut_stream={"after_call": True}``) or True for none (``hang=True``).
    """
    actions, counts = steps_of(builder, "action"), steps_of(builder, "count")
    if len(args) > 1:
        raise ScriptError(f"@pytest.mark.fake_mcp_fault takes at most one positional (the method), got {args!r}")
    match = {k: v for k, v in kwargs.items() if k not in actions and k not in counts}
    try:
        rule = on(*args, **match)
    except TypeError as exc:
        raise ScriptError(
            f"@pytest.mark.fake_mcp_fault: {exc}; actions are {', '.join(actions)}; counts are {', '.join(counts)}"
        ) from None
    for name, value in kwargs.items():
        if name in match:
            continue
        method = getattr(rule, name)
        if value is False:
            continue
        if value is True:
            method()
        elif isinstance(value, Mapping):
            method(**value)
        else:
            method(value)
    if not rule.faults:
        raise ScriptError(f"@pytest.mark.fake_mcp_fault{args!r}: give an action, one of {', '.join(actions)}")
    return rule
