"""A local HTTP server in the Hugging Face Hub's layout, for `coli models pull REPO` (the Hub itself
is not reachable from the tests): what huggingface_hub 2.x requests, answered as the Hub answers.

    GET  /api/models/ORG/NAME/tree/REV?recursive=...  the file list (path, size, oid, lfs.oid = SHA-256)
    HEAD /ORG/NAME/resolve/REV/FILE                  X-Repo-Commit, ETag (the SHA-256), Content-Length
    GET  /ORG/NAME/resolve/REV/FILE                  the bytes; Range: bytes=N- answers 206 from N
    (cut_after: the connection drops part-way; stall_after: the bytes stop coming; corrupt: other bytes)

    with HubServer({"org/tiny-GGUF": {"tiny-Q4_K_M.gguf": data}}) as hub:
        env["HF_ENDPOINT"] = hub.url
"""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubServer:
    def __init__(self, repos: dict[str, dict[str, bytes]]):
        self.repos = repos
        self.log: list[tuple[str, str, str | None]] = []  # (method, path, Range)
        self.cut_after: dict[str, int] = {}  # file -> drop the first full GET's connection after this many bytes
        self.corrupt: set[str] = set()  # files whose bytes differ from what the tree and ETag say
        self.stall_after: dict[str, int] = {}  # file -> send this many bytes, then nothing (a run to kill)
        self.stopping = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._serve(head=True)

            def do_GET(self) -> None:
                self._serve(head=False)

            def _serve(self, head: bool) -> None:
                path = self.path.split("?", 1)[0]
                hub.log.append((self.command, path, self.headers.get("Range")))
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
                    repo = "/".join(parts[2:4])
                    if repo not in hub.repos:
                        return self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                    return self._json(200, [hub.entry(name, data) for name, data in hub.repos[repo].items()])
                if len(parts) >= 5 and parts[2] == "resolve":
                    repo, name = "/".join(parts[:2]), "/".join(parts[4:])
                    data = hub.repos.get(repo, {}).get(name)
                    if data is None:
                        return self._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
                    return self._file(name, data, head)
                self._json(404, {"error": "not found"})

            def _json(self, status: int, payload, headers: dict | None = None) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                             **(headers or {})}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _file(self, name: str, data: bytes, head: bool) -> None:
                sha = hashlib.sha256(data).hexdigest()
                sent = bytes(b ^ 0xFF for b in data[:64]) + data[64:] if name in hub.corrupt else data
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes=") and not head:
                    start = int(rng[6:].split("-", 1)[0])
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{sha}"')
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if head:
                    return
                stall = hub.stall_after.pop(name, None) if not start else None
                if stall is not None:
                    self.wfile.write(sent[:stall])
                    self.wfile.flush()
                    hub.stopping.wait(60)
                    self.close_connection = True
                    return
                cut = hub.cut_after.pop(name, None) if not start else None
                if cut is not None:  # the network drops: half the bytes, then the connection closes
                    self.wfile.write(sent[start:start + cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(sent[start:])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @staticmethod
    def entry(name: str, data: bytes) -> dict:
        blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
        return {"type": "file", "path": name, "size": len(data), "oid": blob,
                "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}}

    def __enter__(self) -> "HubServer":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
