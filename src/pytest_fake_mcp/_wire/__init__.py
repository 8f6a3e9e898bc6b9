"""The wire and the words: what every other package speaks, importing nothing of the project.

- ``_types``: the type aliases (JSON values, JSON-RPC messages, ASGI callables);
- ``_errors``: the exceptions the package raises, public and internal;
- ``_protocol``: JSON-RPC 2.0 and MCP streamable-HTTP vocabulary: constants, parsing, message builders;
- ``_mcp_param``: the ``Mcp-Param-*`` headers that mirror tool arguments, and the modern era's check of them;
- ``_options``: :class:`FakeMCPOptions`, how one fake server behaves (the marker's keywords go straight in).
- ``_roles``: who built an HTTP client: the test's stand-in browser is not the client under test.
"""
