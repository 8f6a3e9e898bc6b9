"""``fake-mcp serve``: the fake as a standalone server, for clients in any language.

- ``_main``: the command line: arguments, the listener, the lifetime of the process;
- ``_control``: :class:`ControlFront`, the ``/_fake/`` HTTP API beside ``/mcp``: scripts faults, reads the journal;
- ``_profiles``: what ``--profile NAME`` serves, built on the public serving API only.
"""
