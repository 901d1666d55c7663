"""`coli web`: the server plus the dashboard in a native window (the browser when there is none)."""
from __future__ import annotations

import argparse
import functools
import os
import signal

from colibri.commands import serve as serve_cmd
from colibri.serve_config import DEFAULT_PORT

HELP = "the server plus the dashboard in a native window (pywebview; the browser when there is none)"


def _serve_parser() -> argparse.ArgumentParser:
    """`coli serve`'s own parser, so `coli web` takes every serve flag and stays in step with it."""
    holder = argparse.ArgumentParser(add_help=False)
    sub = holder.add_subparsers(parser_class=functools.partial(argparse.ArgumentParser, add_help=False))
    serve_cmd.register(sub)
    return sub.choices["serve"]


def register(sub: argparse._SubParsersAction) -> None:
    serve_parser = _serve_parser()
    p = sub.add_parser("web", help=HELP, parents=[serve_parser],
                       description="Start `coli serve` (every serve flag applies) and open the dashboard in a "
                                   "native window that shows the model loading. Closing the window stops the "
                                   "server. The window needs the desktop extra: pip install 'colibri[desktop]'.")
    p.add_argument("--keep-serving", action="store_true",
                   help="closing the window leaves the server running (Ctrl+C stops it)")
    p.add_argument("--no-browser", action="store_true",
                   help="open nothing: serve only, as `coli serve` (for a dashboard opened by hand)")
    p.set_defaults(func=run, serve_parser=serve_parser)


def run(args: argparse.Namespace) -> int:
    from colibri import desktop

    serve_parser = args.serve_parser
    # validate exactly as `coli serve` will (named errors before any window opens); it normalises a copy
    cfg = serve_cmd.config_from_args(argparse.Namespace(**vars(args)))
    if args.port is None and not os.environ.get("COLI_PORT") and not desktop.port_is_free(cfg.host, DEFAULT_PORT):
        print(f"colibri: port {DEFAULT_PORT} is taken; serving on a free port instead", flush=True)
        args.port = 0
    argv = desktop.serve_argv(args, serve_parser)
    argv += ["-v"] * max(0, args.verbose - args.serve_verbose)  # `coli -v web` is `coli web -v`
    if cfg.upstream_key:  # as the API key: in the child's environment, not its argv
        os.environ["COLI_UPSTREAM_KEY"] = cfg.upstream_key
    server = desktop.ServerChild(argv, api_key=cfg.api_key).start()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so `finally` stops the server (Ctrl+C already raises)
    try:
        if args.no_browser:
            return desktop.run_browser(server, "--no-browser", no_browser=True)
        reason = desktop.gui_unavailable_reason()  # runs while the model loads
        if reason is not None:
            return desktop.run_browser(server, reason)
        return desktop.run_window(server, keep_serving=args.keep_serving)
    finally:
        if server.running:
            server.stop()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
