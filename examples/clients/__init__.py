"""Four MCP clients, the way people write them, for the example tests to point at the fake.

* ``naive``: a new HTTP client and a new session for every tool call.
* ``two_phase``: seed 000's ``McpClient``: one HTTP client; on 404 it re-runs ``initialize`` on the
  same ``ClientSession`` (which never reaches the server as a new session).
* ``kiln_cache``: seed 004's session cache keyed ``server:run-id`` through ``contextvars``, with its
  check-then-create race.
* ``reusing``: the project's reference client, ``ReusingSessionClient``, and its ``SessionCache``.

``sdk`` hides the few names that differ between mcp 1.x and mcp 2.x.
"""
