"""The fake server itself: a plain ASGI app that answers MCP over streamable HTTP as the real SDK servers do.

- ``_app``: :class:`FakeMCPApp`, the ASGI app: routing, the request hooks faults use, the answers' bytes;
- ``_request``: :class:`RequestContext`, the state of one HTTP exchange while the fake answers it;
- ``_checks``: the SDK servers' stateless request checks (transport security, Accept, Content-Type, version);
- ``_eras``: which protocol era answers a request, and the stateless 2026-07-28 era beside the handshake;
- ``_handlers``: the handshake era's answers (initialize, ping, tools, resources, prompts);
- ``_catalog``: what the fake serves: the tools, resources, templates and prompts a test registers;
- ``_announce``: :class:`Announcer`, the catalog's changes mid-test, journaled and announced on GET streams;
- ``_events``: :class:`EventStore`, the opt-in event store: SSE event ids, priming events, the replay of a resume;
- ``_standalone``: :class:`StandaloneStreams`, each session's GET stream with the store on: stored, and resumed;
- ``_auth``: :class:`AuthServer`, the opt-in OAuth authorization server beside the fake and the endpoint's bearer check;
- ``_shapes``: :class:`SessionLossShape`, every way real servers say "I do not know this session";
- ``_gate``: :class:`Gate`, a door held requests wait at until the test opens it.
"""
