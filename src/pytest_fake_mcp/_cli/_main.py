"""``fake-mcp serve``: the same fake server, standalone, for clients in other languages.

The first line on stdout is the endpoint URL and nothing else, so scripts can read it::

    url=$(fake-mcp serve --port 0 | head -n 1)

Beside the endpoint, ``/_fake/`` is the control API (docs/cli.md). SIGINT or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from ._profiles import PROFILES

__all__ = ["main"]

_FOUR_MIB = 4 * 1024 * 1024


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake-mcp", description="A fake streamable-HTTP MCP server.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the fake on 127.0.0.1 until SIGINT/SIGTERM")
    serve.add_argument("--port", type=int, default=0, help="port to listen on (default 0: any free port)")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another address exposes the fake and prints a warning)",
    )
    serve.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="default",
        help="what to serve: default (the echo tool) or conformance (what the MCP conformance suite calls)",
    )
    serve.add_argument(
        "--max-body-size",
        type=int,
        default=_FOUR_MIB,
        help="request bodies over this many bytes get 413 (default 4 MiB with either --flavour: a served port stays "
        "bounded, where the fixture's mcp1 flavour has no limit, as the 1.x SDK)",
    )
    serve.add_argument("--path", default="/mcp", help="endpoint path (default /mcp)")
    serve.add_argument("--json", action="store_true", help="answer POSTs as application/json instead of SSE")
    serve.add_argument(
        "--flavour", choices=["mcp2", "mcp1"], default="mcp2", help="which SDK server line to imitate (default mcp2)"
    )
    serve.add_argument(
        "--era",
        choices=["handshake", "modern", "dual"],
        default=None,
        help="protocol eras to serve: the handshake, the stateless 2026-07-28 era, or both routed per request "
        "(default: dual for mcp2, handshake for mcp1)",
    )
    serve.add_argument(
        "--no-dns-rebinding-protection",
        action="store_true",
        help="accept any Host and Origin header (the SDK checks them on loopback)",
    )
    serve.add_argument(
        "--idle-timeout", type=float, default=None, help="forget sessions idle this many seconds (default: flavour's)"
    )
    serve.add_argument(
        "--auth", action="store_true", help="serve the authorization server beside the endpoint and require tokens"
    )
    serve.add_argument(
        "--event-store", action="store_true", help="keep SSE events so a GET with Last-Event-ID resumes a stream"
    )
    serve.add_argument(
        "--list-changed",
        action="store_true",
        help="announce tool, resource and prompt changes (notifications/*/list_changed)",
    )
    return parser


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name to bind) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def serve(args: argparse.Namespace, out: TextIO, stop: threading.Event, err: TextIO | None = None) -> int:
    """Run the server until ``stop`` is set; print the URL first (warnings to ``err``, default stderr)."""
    err = err if err is not None else sys.stderr
    from .._fake._app import FakeMCPApp
    from .._host._listener import Listener
    from .._host._server import FakeMCPServer
    from .._wire._options import DEFAULT_ALLOWED_HOSTS, FLAVOUR_DEFAULT, FakeMCPOptions
    from ._control import CONTROL_PREFIX, ControlFront

    if args.path.rstrip("/") == CONTROL_PREFIX.rstrip("/") or args.path.startswith(CONTROL_PREFIX):
        print(f"fake-mcp: --path {args.path} would hide the control API under {CONTROL_PREFIX}", file=err)
        return 2
    if args.max_body_size < 1:
        print(f"fake-mcp: --max-body-size {args.max_body_size} must be >= 1 byte", file=err)
        return 2
    allowed_hosts: tuple[str, ...] = DEFAULT_ALLOWED_HOSTS
    if not is_loopback(args.host):
        print(
            f"fake-mcp: warning: listening on {args.host}, so other machines can reach the fake MCP endpoint; "
            f"the control API ({CONTROL_PREFIX}) still answers loopback clients only",
            file=err,
        )
        err.flush()
        if not _is_unspecified(args.host):  # 0.0.0.0 is no Host a client sends
            allowed_hosts = (*DEFAULT_ALLOWED_HOSTS, f"{args.host}:*")
    options = FakeMCPOptions(
        flavour=args.flavour,
        json_response=args.json,
        path=args.path,
        dns_rebinding_protection=not args.no_dns_rebinding_protection,
        allowed_hosts=allowed_hosts,
        max_body_size=args.max_body_size,
        idle_timeout=FLAVOUR_DEFAULT if args.idle_timeout is None else args.idle_timeout,
        hold_timeout=None,  # a standalone server has no test to bound; its faults hold as scripted
        era=FLAVOUR_DEFAULT if args.era is None else args.era,
        auth=args.auth,
        event_store=args.event_store,
        list_changed=args.list_changed,
    )
    app = FakeMCPApp(options)
    listener = Listener(app, host=args.host, port=args.port)
    server = FakeMCPServer(app, listener)
    profile = PROFILES[args.profile]
    profile(server)
    listener.front = ControlFront(server, reinstall=profile)
    listener.start()
    try:
        out.write(f"{listener.origin}{options.path}\n")
        out.flush()
        stop.wait()
    finally:
        listener.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fake-mcp`` console script."""
    args = _parser().parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        return serve(args, sys.stdout, stop)
    except OSError as exc:
        print(f"fake-mcp: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # options that do not go together, e.g. --flavour mcp1 --era modern
        print(f"fake-mcp: {exc}", file=sys.stderr)
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
