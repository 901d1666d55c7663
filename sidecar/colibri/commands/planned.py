"""Subcommands that later work fills; until then each says plainly that it is not built."""
from __future__ import annotations

import argparse

from colibri.errors import ColiError

PLANNED: dict[str, str] = {}  # name -> what it will do (`coli chat` was the last; it is built now)


class NotBuilt(ColiError):
    exit_code = 2


def register(sub: argparse._SubParsersAction) -> None:
    for name, what in PLANNED.items():
        # a module of the same name in commands/ takes over once it exists
        if name in sub.choices:
            continue
        p = sub.add_parser(name, help=f"{what} [not built yet]", add_help=True)
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=_not_built(name, what))


def _not_built(name: str, what: str):
    def run(args: argparse.Namespace) -> int:
        raise NotBuilt(f"not built yet: `coli {name}` ({what}) is planned but this version does not have it")

    return run
