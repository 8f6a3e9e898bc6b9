"""MCP clients written the way people write them, for the example tests to point at the fake.

One module per pattern; where a pattern has a known flaw, the module holds the flawed version and
the corrected one side by side.

* ``naive``: a new HTTP client and a new session for every tool call.
* ``two_phase``: a two-phase ``McpClient``: one HTTP client; on 404 it re-runs ``initialize`` on the
  same ``ClientSession`` (which never reaches the server as a new session). ``ReopeningMcpClient``
  opens a new transport instead.
* ``kiln_cache``: a session cache keyed ``server:run-id`` through ``contextvars``, with its
  check-then-create race.
* ``jit_host``: a host that registers servers just in time, tools named ``server-tool``,
  with a registration timeout; ``DraftMCPHost`` is its first draft.
* ``helper``: a helper with explicit connect and close over several servers, tools named
  ``mcp_<server>_<tool>``; ``StackMCPHelper`` cannot be closed from another task.
* ``agent_runtime``: clients of an agent runtime which keeps state per MCP session;
  ``PooledAgentRuntimeClient`` shares one session between users.
* ``reusing``: the project's reference client, ``ReusingSessionClient``, and its ``SessionCache``.

``sdk`` hides the few names that differ between mcp 1.x and mcp 2.x; ``owned`` gives a session an
owner task of its own, so any task may open and close it.
"""
