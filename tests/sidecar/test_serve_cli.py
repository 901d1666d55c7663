"""`coli serve`'s flags and COLI_* variables, and the refusals that happen before any model loads."""
from __future__ import annotations

import argparse

import pytest

from colibri.commands import serve
from colibri.errors import ColiError
from tests.conftest import run_coli


def config(argv: list[str], monkeypatch, env: dict[str, str] | None = None):
    for name in ("COLI_HOST", "COLI_PORT", "COLI_KV_SLOTS", "COLI_API_KEY", "COLI_ALLOWED_HOSTS", "COLI_CORS_ORIGINS",
                 "COLI_MAX_QUEUE", "COLI_QUEUE_TIMEOUT", "COLI_CONTINUE_ASSISTANT", "COLI_TEMP", "COLI_MODEL", "COLI_KV_PERSIST",
                 "COLI_MAX_CONNECTIONS", "COLI_MAX_CONNECTIONS_PER_IP", "COLI_READ_DEADLINE", "COLI_IDLE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers(dest="command"))
    return serve.config_from_args(parser.parse_args(["serve", *argv]))


def test_defaults(monkeypatch):
    cfg = config([], monkeypatch)
    assert (cfg.host, cfg.port, cfg.kv_slots, cfg.max_queue, cfg.queue_timeout, cfg.max_tokens) == \
        ("127.0.0.1", 8000, 1, 8, 300.0, 1024)
    assert (cfg.api_key, cfg.temperature, cfg.top_p, cfg.continue_assistant, cfg.drain_s) == (None, 0.7, 0.9, True, 30.0)
    assert "http://localhost:5173" in cfg.cors_origins and "tauri://localhost" in cfg.cors_origins
    assert cfg.kv_persist is True
    assert (cfg.max_connections, cfg.max_connections_per_ip, cfg.read_deadline, cfg.idle_timeout) == (64, 8, 30.0, 30.0)


def test_connection_limits(monkeypatch):
    env = {"COLI_MAX_CONNECTIONS": "200", "COLI_MAX_CONNECTIONS_PER_IP": "0", "COLI_READ_DEADLINE": "5",
           "COLI_IDLE_TIMEOUT": "75"}
    cfg = config([], monkeypatch, env)
    assert (cfg.max_connections, cfg.max_connections_per_ip, cfg.read_deadline, cfg.idle_timeout) == (200, 0, 5.0, 75.0)
    cfg = config(["--max-connections", "10", "--max-connections-per-ip", "3", "--read-deadline", "2",
                  "--idle-timeout", "4"], monkeypatch, env)
    assert (cfg.max_connections, cfg.max_connections_per_ip, cfg.read_deadline, cfg.idle_timeout) == (10, 3, 2.0, 4.0)


def test_kv_persist_switch(monkeypatch):
    assert config(["--no-kv-persist"], monkeypatch).kv_persist is False
    assert config([], monkeypatch, {"COLI_KV_PERSIST": "0"}).kv_persist is False
    assert config(["--kv-persist"], monkeypatch, {"COLI_KV_PERSIST": "0"}).kv_persist is True


def test_environment_variables(monkeypatch):
    cfg = config([], monkeypatch, {"COLI_PORT": "9001", "COLI_KV_SLOTS": "4", "COLI_API_KEY": "k",
                                   "COLI_ALLOWED_HOSTS": "a.example, b.example", "COLI_MAX_QUEUE": "2",
                                   "COLI_QUEUE_TIMEOUT": "5", "COLI_CONTINUE_ASSISTANT": "0", "COLI_TEMP": "0.2",
                                   "COLI_CORS_ORIGINS": "+https://ui.example"})
    assert (cfg.port, cfg.kv_slots, cfg.api_key, cfg.max_queue, cfg.queue_timeout) == (9001, 4, "k", 2, 5.0)
    assert cfg.allowed_hosts == ("a.example", "b.example") and not cfg.continue_assistant and cfg.temperature == 0.2
    assert cfg.cors_origins[-1] == "https://ui.example"


def test_flags_win_over_variables(monkeypatch):
    cfg = config(["--port", "7000", "--allowed-host", "x.example", "--cors-origin", "https://only.example"],
                 monkeypatch, {"COLI_PORT": "9001", "COLI_ALLOWED_HOSTS": "a.example"})
    assert cfg.port == 7000 and cfg.allowed_hosts == ("x.example",) and cfg.cors_origins == ("https://only.example",)


@pytest.mark.parametrize("argv, env, words", [
    (["--host", "0.0.0.0"], {}, "without an API key"),
    (["--host", "192.168.1.5"], {}, "without an API key"),
    (["--kv-slots", "17"], {}, "--kv-slots"),
    (["--kv-slots", "0"], {}, "--kv-slots"),
    ([], {"COLI_PORT": "eighty"}, "COLI_PORT"),
    (["--max-connections", "0"], {}, "--max-connections"),
    (["--max-connections-per-ip", "-1"], {}, "--max-connections-per-ip"),
    (["--read-deadline", "0"], {}, "--read-deadline"),
    ([], {"COLI_IDLE_TIMEOUT": "-3"}, "--idle-timeout"),
    ([], {"COLI_READ_DEADLINE": "soon"}, "COLI_READ_DEADLINE"),
])
def test_refusals(argv, env, words, monkeypatch):
    with pytest.raises(ColiError) as err:
        config(argv, monkeypatch, env)
    assert words in str(err.value)


def test_insecure_bind_allowed_when_asked(monkeypatch):
    assert config(["--host", "0.0.0.0", "--allow-insecure-bind"], monkeypatch).host == "0.0.0.0"
    assert config(["--host", "0.0.0.0"], monkeypatch, {"COLI_ALLOW_INSECURE_BIND": "1"}).host == "0.0.0.0"
    assert config(["--host", "0.0.0.0", "--api-key", "k"], monkeypatch).api_key == "k"
    assert config(["--host", "::1"], monkeypatch).host == "::1"


def test_command_line_refuses_before_loading():
    r = run_coli("serve", "--host", "0.0.0.0", "--port", "0", timeout=60)
    assert r.returncode == 1 and "without an API key" in r.stderr and "Traceback" not in r.stderr
    r = run_coli("serve", "--help")
    assert r.returncode == 0 and "--kv-slots" in r.stdout and "COLI_KV_SLOTS" in r.stdout
