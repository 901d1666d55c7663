"""`coli chat` in a real terminal: tmux runs it, the test types into it and reads the screen.

The model loaded in the process is the user's default, Qwen2.5-Coder 0.5B Instruct (it follows
instructions, so "count to 300" runs long enough to be stopped with Ctrl+C); `--url` is checked
against a `coli serve` of Gemma 3 270M. tmux is Debian's (scripts/test.sh installs it and sets
COLI_REQUIRE_TMUX=1, so there a missing tmux fails instead of skipping)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, real_model_path
from tests.sidecar.serve_support import ServerProcess
from tests.speed import scaled

WRAPPER = """
import signal, subprocess, sys, time
child = subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGINT, signal.SIG_IGN)
print(f"[exited {child.wait()}]", flush=True)
time.sleep(600)
"""
STATS = re.compile(r"\[(\d+) tokens?, ([\d.]+) tok/s, first token [\d.]+ s, \d+ prompt tokens")


class Tmux:
    """One tmux server on a private socket, one window running `command`."""

    def __init__(self, tmp: Path, command: list[str], env: dict[str, str]):
        self.socket = str(tmp / "tmux.sock")
        # a wrapper that prints the program's exit status and keeps the pane (tmux's own
        # #{pane_dead_status} is not always filled in); it ignores Ctrl+C, the program does not
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "200",
                        "-s", "chat", sys.executable, "-c", WRAPPER, *command], check=True, env=env, cwd=tmp)
        subprocess.run(["tmux", "-S", self.socket, "set-option", "-g", "history-limit", "5000"], check=True)

    def exit_status(self, timeout: float = 60) -> int:
        """The program's exit status, once it has exited."""
        screen = self.wait_for(r"^\[exited -?\d+\]$", timeout)
        return int(re.findall(r"^\[exited (-?\d+)\]$", screen, re.M)[-1])

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "chat", *keys], check=True)

    def type(self, text: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "chat", "-l", text], check=True)
        self.keys("Enter")

    def screen(self) -> str:
        return subprocess.run(["tmux", "-S", self.socket, "capture-pane", "-p", "-J", "-t", "chat", "-S", "-"],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, test, timeout: float = 120) -> str:
        """The screen once test(screen) holds (a regex or a function); fails with the screen otherwise."""
        check = (lambda s: re.search(test, s, re.M)) if isinstance(test, str) else test
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            text = self.screen()
            if check(text):
                return text
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {test!r}; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def tmux_ok():
    if shutil.which("tmux") is None:
        message = "tmux is not installed (apt-get install tmux; scripts/test.sh does it)"
        if os.environ.get("COLI_REQUIRE_TMUX") == "1":
            pytest.fail(message)
        pytest.skip(message)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "sidecar"),
                                                                     os.environ.get("PYTHONPATH")]))}
    env["TERM"] = "xterm-256color"
    env["COLI_STATE_DIR"] = str(tmp_path / "state")
    env.pop("TMUX", None)
    return env


def count_of(screen: str, regex: re.Pattern) -> int:
    return len(regex.findall(screen))


def test_chat_in_the_terminal(tmp_path, tmux_ok):
    real_model_path("qwen2.5-coder-0.5b-instruct")
    saved = tmp_path / "conversation.json"
    t = Tmux(tmp_path, [sys.executable, "-m", "colibri", "chat", "--model", "qwen2.5-coder-0.5b-instruct",
                        "--ctx", "2048", "--kv-slots", "2", "--max-tokens", "400", "--temperature", "0",
                        "--threads", "2"], _env(tmp_path))
    try:
        t.wait_for(r"^chatting with qwen2\.5-coder-0\.5b-instruct at http://127\.0\.0\.1:\d+", 120)
        t.wait_for(r"^>>> $")
        # one question: streamed, then tokens/s
        t.type("What is 2 + 3? Answer with the number only.")
        screen = t.wait_for(lambda s: count_of(s, STATS) == 1)
        assert re.search(r"^>>> What is 2 \+ 3\? Answer with the number only\.\n5\n", screen, re.M), screen
        tokens, rate = STATS.search(screen).groups()
        assert int(tokens) >= 1 and float(rate) >= 0
        # a line ending in \ continues; a """ block runs to the next """
        t.type("Reply with the word OK only.\\")
        t.wait_for(r"^\.\.\. $")
        t.type("Thank you.")
        t.wait_for(lambda s: count_of(s, STATS) == 2)
        t.type('"""')
        t.type("Reply with the word YES only.")
        t.type("Nothing else.")
        t.type('"""')
        t.wait_for(lambda s: count_of(s, STATS) == 3)
        # slots
        t.type("/slot 1")
        t.wait_for(r"^\[slot 1\]$")
        t.type("/slot 5")
        t.wait_for(r"^no slot 5: the server has 2 \(0-1; --kv-slots for more\)$")
        # Ctrl+C stops a reply, not the program
        t.type("Count from 1 to 300, one number per line, nothing else.")
        t.wait_for(r"^12$")
        t.keys("C-c")
        screen = t.wait_for(r"^\[stopped")
        assert "Traceback" not in screen
        assert not re.search(r"^300$", screen, re.M), "the reply ran to its end"
        # the conversation goes on (on slot 1), and is saved
        t.type(f"/save {saved}")
        t.wait_for(r"^\[saved 8 messages to ")
        data = json.loads(saved.read_text())
        users = [m["content"] for m in data["messages"] if m["role"] == "user"]
        assert users == ["What is 2 + 3? Answer with the number only.", "Reply with the word OK only.\nThank you.",
                         "Reply with the word YES only.\nNothing else.",
                         "Count from 1 to 300, one number per line, nothing else."]
        assert data["messages"][1] == {"role": "assistant", "content": "5"}
        assert data["messages"][-1]["content"].startswith("1\n2\n3\n")  # what was shown before Ctrl+C
        t.type("/reset")
        t.wait_for(r"^\[conversation cleared\]$")
        # Ctrl+C at the prompt does not leave; Ctrl+D does, cleanly
        t.keys("C-c")
        t.wait_for(r"^\(Ctrl\+D or /exit leaves\)$")
        t.keys("C-d")
        assert t.exit_status() == 0 and "Traceback" not in t.screen(), t.screen()
    finally:
        t.close()


def test_chat_with_a_running_server(tmp_path, tmux_ok, default_model):
    with ServerProcess(["--model", str(default_model), "--ctx", "512", "--kv-slots", "3", "--no-kv-persist",
                        "--threads", "2"]) as srv:
        t = Tmux(tmp_path, [sys.executable, "-m", "colibri", "chat", "--url", srv.base, "-n", "8",
                            "--temperature", "0"], _env(tmp_path))
        try:
            t.wait_for(rf"^chatting with gemma-3-270m at {re.escape(srv.base)}")
            t.type("/slot 2")
            t.wait_for(r"^\[slot 2\]$")
            t.type("Hello")
            t.wait_for(STATS.pattern)
            t.type("/exit")
            assert t.exit_status() == 0, t.screen()
        finally:
            t.close()
        # the request ran on the slot asked for
        status, _, raw = srv.get("/profile")
        assert status == 200
        turns = json.loads(raw).get("turns") or []
        assert turns and turns[-1]["slot"] == 2, turns


def test_a_bad_url_is_a_named_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "colibri", "chat", "--url", "http://127.0.0.1:9"],
                       capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert r.returncode == 1 and "cannot reach http://127.0.0.1:9" in r.stderr and "Traceback" not in r.stderr


def test_reasoning_is_folded_into_one_line():
    """The display of a reply's reasoning: plain terminal formatting, fed the deltas a stream brings."""
    import io

    from colibri.chat_cli import ChatSession, _Fold

    for color, show in ((True, False), (False, False), (False, True)):
        out = io.StringIO()
        session = ChatSession(None, "m", max_tokens=8, temperature=None, out=out, color=color, show_reasoning=show)
        fold = _Fold(session)
        for piece in ("The user", " wants a", " greeting.\nSo: hi."):
            fold.delta("reasoning", piece)
        fold.delta("content", "Hello")
        fold.delta("content", "!")
        fold.end()
        lines = out.getvalue().split("\n")
        note = re.compile(r"\[thought for [\d.]+ s, 7 words\]")
        if show:  # in full, then the note, then the answer
            assert out.getvalue().startswith("The user wants a greeting.\nSo: hi.\n") and note.search(out.getvalue())
        else:  # never more than one line of it on screen
            assert len(lines) == 3 and note.search(lines[0]) and lines[1] == "Hello!" and lines[2] == "", lines
            if color:
                last_frame = lines[0].rsplit("\r", 1)[-1]
                assert note.search(last_frame) and "greeting" not in last_frame
