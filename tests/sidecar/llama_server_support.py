"""llama.cpp's own OpenAI server, `llama-server`, as an upstream engine in the tests of `coli serve --upstream`.

    binary = llama_server_binary()                    # COLI_LLAMA_SERVER (scripts/test.sh builds it); else a skip
    with LlamaCppServer(binary, model) as server:     # a child process on a free port, waited for until it serves
        post(server.url, "/v1/chat/completions", {...})

scripts/test.sh builds it once from the llama.cpp that the llama-cpp-python sdist vendors
(scripts/build-llama-server.sh) and exports COLI_LLAMA_SERVER; where that build failed, or outside
test.sh, the tests that need it skip, saying why.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.sidecar.serve_support import wait_for
from tests.sidecar.upstream_support import free_port, get


def llama_server_binary() -> Path:
    """The llama-server binary named by COLI_LLAMA_SERVER, or a skip naming what is missing."""
    named = os.environ.get("COLI_LLAMA_SERVER")
    if not named:
        pytest.skip("COLI_LLAMA_SERVER is not set: scripts/test.sh builds llama.cpp's llama-server and sets it")
    path = Path(named)
    if not os.access(path, os.X_OK):
        pytest.skip(f"llama-server was not built at {path} (its build log: {path.parent}.log)")
    return path


def llama_server_version(binary: Path) -> str:
    """What the binary says of itself (`version: 0 (0c1e57098)`): the llama.cpp commit it was built from."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    return " ".join((out.stdout + out.stderr).split())


class LlamaCppServer:
    """llama-server on `model` in a child process; `prefix` runs it elsewhere (`ip netns exec NS`), `host` is
    the address it listens on there. `parallel` slots, each with `ctx` tokens of context."""

    def __init__(self, binary: Path, model: str | os.PathLike, host: str = "127.0.0.1", port: int | None = None,
                 parallel: int = 1, ctx: int = 2048, prefix: list[str] | None = None, extra: list[str] | None = None):
        self.binary, self.model = binary, str(model)
        self.host, self.port = host, port or free_port()
        self.url = f"http://{host}:{self.port}"
        self.parallel, self.ctx = parallel, ctx
        self.prefix, self.extra = prefix or [], extra or []
        self.proc: subprocess.Popen | None = None

    @property
    def model_id(self) -> str:
        return self.model  # llama-server lists its model by the path it was given

    def __enter__(self) -> "LlamaCppServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def start(self) -> "LlamaCppServer":
        argv = [*self.prefix, str(self.binary), "--model", self.model, "--host", self.host, "--port", str(self.port),
                "--ctx-size", str(self.ctx * self.parallel), "--parallel", str(self.parallel), "--threads", "1",
                "--no-webui", "--no-warmup", *self.extra]
        self.log = tempfile.TemporaryFile()  # its log: read only when it does not start
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log)
        if not wait_for(self.ready, timeout=120, interval=0.2) or self.proc.poll() is not None:
            self.kill()
            self.log.seek(0)
            raise RuntimeError(f"llama-server did not start on {self.url}: "
                               f"{self.log.read().decode('utf-8', 'replace')[-2000:]}")
        return self

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            return True  # exited: start() reports it
        try:
            return get(self.url, "/health")[0] == 200  # 503 while the model loads
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.log.close()
