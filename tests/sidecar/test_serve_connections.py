"""Connections of a real `coli serve` (the default model), over raw sockets: the read deadline
(headers and body), the idle keep-alive limit, the caps, and 300 slowloris connections that
leave a normal client answered within a second. Short deadlines keep it fast."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from tests.sidecar.serve_support import ServerProcess

MODEL = "gemma-3-270m"
BASE_ARGS = ["--kv-slots", "1", "--ctx", "256", "--no-kv-persist", "--threads", "2"]
CHAT = json.dumps({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}).encode()


def non_loopback_address() -> str | None:
    """This machine's address on its default route, to connect from as a LAN client would."""
    for probe in ("10.255.255.255", "192.0.2.1", "8.8.8.8"):  # connecting UDP sends no packet
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((probe, 9))
            address = s.getsockname()[0]
        except OSError:
            continue
        finally:
            s.close()
        if not address.startswith("127.") and address != "0.0.0.0":
            return address
    return None


def connect(srv: ServerProcess, host: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
    return socket.create_connection((host, srv.port), timeout=timeout)


def closed_after(sock: socket.socket, limit: float = 10) -> tuple[float, bytes]:
    """Seconds until the server closes `sock`, and every byte it sent before."""
    t0 = time.monotonic()
    got = b""
    sock.settimeout(limit)
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return time.monotonic() - t0, got


def health(srv: ServerProcess, key: str | None = None) -> dict:
    status, _, raw = srv.get("/health", headers={"Authorization": f"Bearer {key}"} if key else None)
    assert status == 200
    return json.loads(raw)


def timed_request(srv: ServerProcess, method: str, path: str, body: bytes | None = None,
                  headers: dict | None = None) -> tuple[float, int]:
    t0 = time.monotonic()
    status, _, _ = srv.request(method, path, body, {"Content-Type": "application/json", **(headers or {})}, timeout=30)
    return time.monotonic() - t0, status


# ---- the read deadline and the idle limit ---------------------------------------------------

@pytest.fixture(scope="module")
def quick():
    """Requests must be read within 1 s; idle connections may wait 3 s."""
    with ServerProcess([*BASE_ARGS, "--read-deadline", "1", "--idle-timeout", "3"]) as srv:
        yield srv


SLOW = {
    "headers a byte at a time": [b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"] + [b"X"] * 40,
    "a body shorter than its Content-Length": [b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                               b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\""],
    "a chunked body with no terminator": [b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                          b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                                          b"5\r\n{\"mod\r\n"],
}


@pytest.mark.parametrize("name", list(SLOW))
def test_a_request_not_read_in_time_is_closed_with_no_reply(quick, name):
    before = health(quick)["connections"]["timed_out"]
    sock = connect(quick)
    parts = SLOW[name]

    def trickle():
        for part in parts:
            try:
                sock.sendall(part)
            except OSError:
                return
            time.sleep(0.1)

    threading.Thread(target=trickle, daemon=True).start()
    elapsed, got = closed_after(sock)
    sock.close()
    assert got == b"" and 0.9 <= elapsed < 2.5, (elapsed, got[:200])
    assert health(quick)["connections"]["timed_out"] == before + 1


def test_a_request_read_in_time_is_answered_and_the_connection_kept(quick):
    """Headers and a body sent in pieces within the deadline; then a second request on the
    same connection, and the next deadline counts from its own first byte."""
    sock = connect(quick)
    for _ in range(2):
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(CHAT))
        for part in (head[:20], head[20:], CHAT[:10], CHAT[10:]):
            sock.sendall(part)
            time.sleep(0.2)
        reply = b""
        while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < int(
                reply.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0]):
            reply += sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
        time.sleep(1.2)  # longer than the read deadline, shorter than the idle limit
    sock.close()


def test_an_idle_connection_is_closed_after_the_idle_limit(quick):
    never = connect(quick)  # opened, nothing sent
    used = connect(quick)
    used.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(0.3)
    first = used.recv(65536)
    assert first.startswith(b"HTTP/1.1 200 ")
    elapsed, got = closed_after(used)
    assert got == b"" and 2.0 <= elapsed < 4.5, elapsed
    elapsed, got = closed_after(never)
    assert got == b"" and elapsed < 4.5


def test_a_body_with_no_content_type_is_a_415(quick):
    """What `curl --data-binary @file -H 'Content-Type:'` sends."""
    sock = connect(quick)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n%s" % (len(CHAT), CHAT))
    _, got = closed_after(sock)
    assert got.startswith(b"HTTP/1.1 415 ") and b"unsupported_media_type" in got, got[:300]


# ---- caps ---------------------------------------------------------------------------------------

class Slowloris:
    """N connections that open a request and then send one header byte every half second."""

    def __init__(self, port: int, n: int, source: str = "127.0.0.1", target: str = "127.0.0.1"):
        self.port, self.n, self.source, self.target = port, n, source, target
        self.socks: list[socket.socket] = []
        self.stop = threading.Event()

    def __enter__(self) -> "Slowloris":
        for _ in range(self.n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((self.source, 0))
            s.settimeout(5)
            s.connect((self.target, self.port))
            try:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")
            except OSError:
                pass  # already cut to make room for a newer one
            self.socks.append(s)
        threading.Thread(target=self._trickle, daemon=True).start()
        return self

    def _trickle(self) -> None:
        while not self.stop.wait(0.5):
            for s in self.socks:
                try:
                    s.send(b"a")
                except OSError:
                    pass

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for s in self.socks:
            s.close()


def test_300_slowloris_connections_leave_a_normal_client_answered_within_a_second(default_model):
    with ServerProcess([*BASE_ARGS, "--read-deadline", "30"]) as srv:
        timed_request(srv, "POST", "/v1/chat/completions", CHAT)  # warm
        with Slowloris(srv.port, 300):
            time.sleep(1.0)
            took = [timed_request(srv, "GET", "/health"), timed_request(srv, "POST", "/v1/chat/completions", CHAT),
                    timed_request(srv, "GET", "/v1/models")]
            conns = health(srv)["connections"]
        print(f"slowloris 300 from loopback: normal client {[round(t, 3) for t, _ in took]} s, {conns}")
    assert [s for _, s in took] == [200, 200, 200]
    assert max(t for t, _ in took) < 1.0, took
    assert conns["open"] <= 64 and conns["evicted"] >= 300 - 64 and conns["refused"] == 0


def test_slowloris_from_a_lan_address_is_held_to_its_per_address_cap():
    lan = non_loopback_address()
    if lan is None:
        pytest.skip("this machine has no non-loopback address to connect from")
    with ServerProcess([*BASE_ARGS, "--host", "0.0.0.0", "--api-key", "k", "--read-deadline", "30"]) as srv:
        key = {"Authorization": "Bearer k"}
        with Slowloris(srv.port, 300, source=lan, target=lan):
            time.sleep(1.0)
            took = [timed_request(srv, "GET", "/health", headers=key),
                    timed_request(srv, "POST", "/v1/chat/completions", CHAT, headers=key)]
            conns = health(srv, "k")["connections"]
        print(f"slowloris 300 from {lan}: normal client {[round(t, 3) for t, _ in took]} s, {conns}")
    assert [s for _, s in took] == [200, 200] and max(t for t, _ in took) < 1.0, took
    assert conns["open"] <= 8 + 2 and conns["evicted"] >= 300 - 8


def read_head(sock: socket.socket) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_over_a_cap_of_busy_connections_the_newcomer_is_closed_with_no_reply():
    lan = non_loopback_address()
    args = [*BASE_ARGS, "--max-connections", "3", "--max-connections-per-ip", "2"]
    if lan:
        args += ["--host", "0.0.0.0", "--api-key", "k"]
    auth = b"Authorization: Bearer k\r\n" if lan else b""
    with ServerProcess(args) as srv:
        def feed(host: str) -> socket.socket:  # /events: a stream that stays open, a busy connection
            s = connect(srv, host)
            s.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"\r\n")
            assert read_head(s).startswith(b"HTTP/1.1 200 ")
            return s

        busy = [feed("127.0.0.1") for _ in range(3)]  # loopback: no per-address cap, the total is 3
        late = connect(srv)
        elapsed, got = closed_after(late)
        assert got == b"" and elapsed < 2
        for s in busy:
            s.close()
        time.sleep(0.5)
        if lan:  # a LAN address: its own cap of 2; a waiting connection makes room, a busy one does not
            mine = [feed(lan), feed(lan)]
            third = connect(srv, lan)
            assert closed_after(third)[1] == b""
            mine[1].close()
            time.sleep(0.3)
            idle = connect(srv, lan)  # open, nothing sent yet: waiting
            time.sleep(0.2)
            newest = connect(srv, lan)  # takes the idle one's place
            newest.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert closed_after(newest)[1].startswith(b"HTTP/1.1 200 ")
            assert closed_after(idle)[1] == b""
            mine[0].close()
        conns = health(srv, "k" if lan else None)["connections"]
    assert conns["refused"] == (2 if lan else 1) and conns["evicted"] == (1 if lan else 0)
