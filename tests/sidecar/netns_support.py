"""Hosts of a pretend cluster on one machine: a Linux network namespace per host, each with its own address on
a bridge, the test (and the gateway) on the bridge's own address, as machines on one switch.

    reason = netns_unavailable()                     # None, or why not (needs root: CAP_NET_ADMIN, `ip`)
    with Hosts(3) as hosts:                          # 10.47.N.2-4, this machine 10.47.N.1
        for host in hosts.all: Popen([*host.run, "llama-server", "--host", host.address, ...])

Used by tests/sidecar/test_upstream_cluster.py and bench/bench_gateway.py. Names carry the process id, so
two runs at once do not meet; what __enter__ made, __exit__ removes.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "making network namespaces needs root (CAP_NET_ADMIN)"
    probe = f"c47probe{os.getpid() % 100000}"
    try:
        ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` failed: {exc.stderr.strip()}"
    ip("netns", "del", probe)
    return None


@dataclass
class Host:
    name: str  # its network namespace
    address: str

    @property
    def run(self) -> list[str]:
        """The prefix that runs a command on this host (`ip netns exec` execs it: its pid is the command's)."""
        return ["ip", "netns", "exec", self.name]


class Hosts:
    """n namespaces on a bridge: host i at SUBNET.(i+2), this machine at SUBNET.1."""

    def __init__(self, n: int = 3):
        tag = os.getpid() % 100000
        self.subnet = f"10.47.{tag % 250}"
        self.bridge = f"c47br{tag}"
        self.all = [Host(f"c47h{tag}-{i}", f"{self.subnet}.{i + 2}") for i in range(n)]
        self.local = f"{self.subnet}.1"

    def __enter__(self) -> "Hosts":
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.local}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            for i, host in enumerate(self.all):
                veth = f"{self.bridge}v{i}"
                ip("netns", "add", host.name)
                ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.name)
                ip("link", "set", veth, "master", self.bridge, "up")
                ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", "eth0")
                ip("-n", host.name, "link", "set", "eth0", "up")
                ip("-n", host.name, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for i, host in enumerate(self.all):  # each veth pair first: a namespace outlives its name while a
            subprocess.run(["ip", "link", "del", f"{self.bridge}v{i}"], capture_output=True, timeout=30)  # process
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=30)  # is left in it
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
