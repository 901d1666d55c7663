"""`coli tokenize`: show how the model's tokenizer splits a text (like llama.cpp's llama-tokenize)."""
from __future__ import annotations

import argparse
import json
import sys

from colibri.errors import ColiError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokenize", help="token ids and pieces of a text, as the model tokenizes it")
    p.add_argument("--model", "-m", default=None,
                   help="GGUF file or model id, e.g. gemma-3-270m (default: $COLI_MODEL, else "
                        "$COLI_DEFAULT_MODEL, else qwen2.5-coder-0.5b-instruct, downloaded once)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", "-t", help="the text to tokenize")
    src.add_argument("--file", "-f", help="read the text from a file ('-' for standard input)")
    p.add_argument("--special", action="store_true",
                   help="match control tokens written in the text (e.g. <start_of_turn>) as those tokens")
    p.add_argument("--no-bos", action="store_true", help="do not add the BOS token the model asks for")
    p.add_argument("--ids", action="store_true", help="print only the ids, as a Python-style list")
    p.add_argument("--json", action="store_true", help='print {"tokens": [...], "pieces": [...]}')
    p.set_defaults(func=run)


def read_text(args: argparse.Namespace) -> bytes:
    if args.text is not None:
        return args.text.encode("utf-8", "surrogateescape")
    if args.file == "-":
        return sys.stdin.buffer.read()
    try:
        with open(args.file, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ColiError(f"cannot read {args.file}: {exc.strerror}") from exc


def piece_text(piece: bytes) -> str:
    """A piece for display: UTF-8 where it is, \\xNN for bytes that are not."""
    return piece.decode("utf-8", "backslashreplace")


def run(args: argparse.Namespace) -> int:
    from colibri.engine import Engine
    from colibri.models import resolve_model

    data = read_text(args)
    with Engine(resolve_model(args.model), vocab_only=True) as engine:
        tokens = engine.tokenize(data, add_bos=False if args.no_bos else None, special=args.special)
        pieces = [piece_text(engine.token_bytes(t, special=True)) for t in tokens]
    if args.json:
        print(json.dumps({"tokens": tokens, "pieces": pieces}, ensure_ascii=False))
    elif args.ids:
        print("[" + ", ".join(str(t) for t in tokens) + "]")
    else:
        for tok, piece in zip(tokens, pieces):
            print(f"{tok:>6} -> '{piece}'")
    return 0
