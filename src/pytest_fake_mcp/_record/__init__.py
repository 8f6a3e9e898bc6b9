"""What happened, and how it reads: the fake writes here, the oracles and the reports read.

- ``_journal``: :class:`Journal`, one frozen :class:`Exchange` per HTTP exchange, queried like pytest-httpx;
- ``_sessions``: the sessions the fake opened, live and ended, and why each ended;
- ``_counters``: :class:`HTTPClientCounter`, the HTTP clients a test creates (httpx and httpx2, sync and async);
- ``_analysis``: what the journal's data means (stale and harmless uses of ids, unknown tools, crossed tasks),
  shared by the oracles and the renderer;
- ``_report``: the rendering for people: the sequence diagram, failure messages, the HTML trace.
"""
