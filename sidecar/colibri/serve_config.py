"""Everything `coli serve` can be told, with its default and the COLI_* variable of each
(docs/configuration.md#serve-flags).

One frozen object travels from the command line to the app factory; nothing
below reads the environment again, so tests build a ServeConfig directly.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from colibri.engine import MAX_SLOTS

DEFAULT_PORT = 8000
VITE_DEV_PORT = 5173
TAURI_ORIGINS = ("tauri://localhost", "http://tauri.localhost", "https://tauri.localhost")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
MAX_KV_SLOTS = MAX_SLOTS  # the engine's limit
MAX_BODY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ServeConfig:
    model_path: str | None = None  # None: COLI_MODEL, else the default model
    model_id: str = ""  # "" : derived from the model file
    model_aliases: tuple[str, ...] = ()  # --model-alias: more names requests may send for the model ("*": any)
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    api_key: str | None = None
    kv_slots: int = 1
    kv_persist: bool = True  # save each slot after every request, restore at start (paths.kv_dir)
    ctx: int = 0  # tokens of context per slot; 0: the plan's automatic choice (plan.auto_ctx)
    threads: int = 0
    max_queue: int = 8
    queue_timeout: float = 300.0
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()  # the effective list (see cors_origins_from)
    max_tokens: int = 1024  # the default budget when a request names none
    temperature: float = 0.7
    top_p: float = 0.9
    continue_assistant: bool = True
    max_body_bytes: int = MAX_BODY_BYTES
    max_connections: int = 64  # open connections in all (docs/server.md#connections)
    max_connections_per_ip: int = 8  # from one client address other than loopback; 0: no such cap
    read_deadline: float = 30.0  # seconds to read a request, headers and body, from its first byte
    idle_timeout: float = 30.0  # seconds a keep-alive connection may stay idle between requests
    keepalive_s: float = 10.0
    stream_interval_ms: float = 50.0  # the engine wakes a stream at most this often while tokens flow; 0: per token
    drain_s: float = 30.0
    web_dir: Path | None = None  # the built dashboard (web/dist); None: not served
    expert_cache_gb: float | None = None  # None: the plan's automatic choice (colibri.plan)
    pin_gb: float | None = None
    io_threads: int = 0  # expert read threads; 0: the engine's default
    direct_io: bool = True  # O_DIRECT expert reads (buffered where the file system refuses them)
    prefetch: bool = True
    expert_policy: str = ""  # lrfu | lru; "": the engine's default (lrfu)
    draft_tokens: int | None = None  # speculative decoding's tokens per step; 0: none; None: the engine's default
    draft_model: str | None = None  # a smaller model of the same vocabulary that drafts (a path or a library id)
    models_dirs: tuple[str, ...] = ()  # --models-dir: serve the library (colibri.serving.pool); () : one model
    max_models: int = 1  # models resident at once with a library
    model_ttl: float = 0.0  # seconds an idle model other than the active one stays loaded; 0: until evicted
    upstreams: tuple[str, ...] = ()  # --upstream: front these engines' OpenAI APIs instead of loading a model
    upstream_key: str | None = None  # sent to every upstream as 'Authorization: Bearer KEY'
    upstream_slots: int = 4  # requests each upstream runs at once (the scheduler's capacity per upstream)
    upstream_probe_s: float = 2.0  # seconds between health probes of the upstreams (COLI_UPSTREAM_PROBE_S)
    upstream_failures: int = 3  # failures in a row that open an upstream's breaker (COLI_UPSTREAM_FAILURES)
    upstream_timeout_s: float = 300.0  # silence after which a forwarded request has failed (--upstream-timeout)
    extra: dict = field(default_factory=dict, compare=False)  # room for later issues' switches

    @property
    def cors_any(self) -> bool:
        return "*" in self.cors_origins


def env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() not in ("0", "false", "no", "off")


def env_list(name: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, "").split(",") if v.strip()]


def aliases_from(values: list[str]) -> tuple[str, ...]:
    """--model-alias values (each may be a comma list), in order, without repeats or blanks."""
    return tuple(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))


def default_cors_origins(port: int) -> list[str]:
    """The dashboard on this server, the Vite dev server and the Tauri shell."""
    ports = sorted({port, DEFAULT_PORT, VITE_DEV_PORT})
    return [f"http://{h}:{p}" for h in ("127.0.0.1", "localhost") for p in ports] + list(TAURI_ORIGINS)


def cors_origins_from(values: list[str], port: int) -> tuple[str, ...]:
    """--cors-origin values: the first plain value replaces the defaults, later ones and
    `+X` values add to the list, `*` allows any origin."""
    origins = default_cors_origins(port)
    replaced = False
    for value in values:
        if value.startswith("+"):
            origins.append(value[1:])
        elif not replaced:
            origins, replaced = [value], True
        else:
            origins.append(value)
    return tuple(dict.fromkeys(o.rstrip("/") if o != "*" else o for o in origins if o))


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_web_dir() -> Path | None:
    """COLI_WEB_DIR, else web/dist of the source checkout when it has been built, else the
    dashboard the installed package carries (colibri/web_dist, put there by setup.py)."""
    env = os.environ.get("COLI_WEB_DIR")
    if env:
        return Path(env)
    package = Path(__file__).resolve().parent
    for guess in (package.parents[1] / "web" / "dist", package / "web_dist"):
        if (guess / "index.html").is_file():
            return guess
    return None
