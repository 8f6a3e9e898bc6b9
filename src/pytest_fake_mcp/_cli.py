"""``fake-mcp serve``: the same fake server, standalone, for clients in other languages.

The first line on stdout is the endpoint URL and nothing else, so scripts can read it::

    url=$(fake-mcp serve --port 0 | head -n 1)

SIGINT or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TextIO

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake-mcp", description="A fake streamable-HTTP MCP server.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the fake on 127.0.0.1 until SIGINT/SIGTERM")
    serve.add_argument("--port", type=int, default=0, help="port to listen on (default 0: any free port)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
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
    return parser


def serve(args: argparse.Namespace, out: TextIO, stop: threading.Event) -> int:
    """Run the server until ``stop`` is set; print the URL first."""
    from ._app import FakeMCPApp
    from ._listener import Listener
    from ._options import FLAVOUR_DEFAULT, FakeMCPOptions

    options = FakeMCPOptions(
        flavour=args.flavour,
        json_response=args.json,
        path=args.path,
        dns_rebinding_protection=not args.no_dns_rebinding_protection,
        idle_timeout=FLAVOUR_DEFAULT if args.idle_timeout is None else args.idle_timeout,
        era=FLAVOUR_DEFAULT if args.era is None else args.era,
    )
    app = FakeMCPApp(options)
    listener = Listener(app, host=args.host, port=args.port)
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
