"""What a container allows this process: the cgroup memory limit and CPU quota.

Docker, Kubernetes and systemd cap a process's memory with a cgroup; /proc/meminfo
(psutil) still tells the host's, so a plan made from it keeps a model resident that
the cap then evicts page by page. The limits are read as the kernel applies them:

  /proc/self/cgroup      which cgroup the process is in: one line per v1 hierarchy
                         ("4:memory:/docker/abc"), the v2 one as "0::/path"
  /proc/self/mountinfo   where each hierarchy is mounted, and the cgroup path its
                         mount shows as its root (a container sees only its own)
  v2                     memory.max, memory.high, memory.current, memory.stat, cpu.max
  v1                     memory.limit_in_bytes, memory.usage_in_bytes, memory.stat,
                         cpu.cfs_quota_us, cpu.cfs_period_us

Every cgroup from the process's up to its mount's root can set a limit; the one that
leaves the least room applies. Room = limit - usage + inactive file pages (page cache
the kernel reclaims before it fails an allocation, as `docker stats` counts it).

Every function takes `root` ("/" in use) so tests build fake trees in a temporary folder.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

UNLIMITED = 1 << 62  # v1 writes "no limit" as LONG_MAX rounded down to a page (9223372036854771712)


@dataclass(frozen=True)
class MemoryLimit:
    limit: int        # bytes: memory.max / memory.high (v2) or memory.limit_in_bytes (v1)
    usage: int        # bytes the cgroup is charged now, page cache included
    reclaimable: int  # inactive file pages among them
    version: int      # 1 or 2
    cgroup: str       # the cgroup that sets the limit, as /proc/self/cgroup names it
    key: str          # the file the limit was read from

    @property
    def available(self) -> int:
        return max(self.limit - self.usage + self.reclaimable, 0)

    def describe(self) -> str:
        return f"cgroup v{self.version} {self.cgroup or '/'} {self.key}"


@dataclass(frozen=True)
class CpuLimit:
    cpus: float       # quota / period
    version: int
    cgroup: str
    key: str


@dataclass(frozen=True)
class Hierarchy:
    version: int
    controllers: frozenset[str]
    path: str         # the process's cgroup in this hierarchy ("/docker/abc")
    mount: Path       # where the hierarchy is mounted (under root)
    mount_root: str   # the cgroup path the mount shows at its top


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    if text is None or text == "max":
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _stat(path: Path) -> dict[str, int]:
    out = {}
    for line in (_read(path) or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def hierarchies(root: str | os.PathLike[str] = "/") -> list[Hierarchy]:
    """The process's cgroups, each with the folder its hierarchy is mounted on."""
    root = Path(root)
    mounts: list[tuple[int, frozenset[str], str, str]] = []  # version, controllers, mount root, mount point
    for line in (_read(root / "proc/self/mountinfo") or "").splitlines():
        head, sep, tail = line.partition(" - ")
        fields, extra = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(extra) < 3:
            continue
        if extra[0] == "cgroup2":
            mounts.append((2, frozenset(), fields[3], fields[4]))
        elif extra[0] == "cgroup":
            mounts.append((1, frozenset(extra[2].split(",")), fields[3], fields[4]))
    out = []
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, names, path = parts
        if hid == "0" and names == "":
            found = [m for m in mounts if m[0] == 2]
            controllers = frozenset()
        else:
            controllers = frozenset(n for n in names.split(",") if n)
            found = [m for m in mounts if m[0] == 1 and controllers <= m[1]]
        if found:
            version, _, mount_root, point = found[0]
            out.append(Hierarchy(version, controllers, path, root / point.lstrip("/"), mount_root))
    return out


def _chain(h: Hierarchy) -> list[tuple[str, Path]]:
    """(cgroup path, folder) from the process's cgroup up to the mount's top, nearest first.
    A path outside what the mount shows (a cgroup namespace) is read at the mount's top."""
    rel = os.path.relpath(h.path or "/", h.mount_root or "/")
    parts = [] if rel.startswith("..") else [p for p in Path(rel).parts if p not in (".", "/")]
    chain = []
    for i in range(len(parts), -1, -1):
        folder = h.mount.joinpath(*parts[:i])
        cg = (h.mount_root.rstrip("/") + "/" + "/".join(parts[:i])).rstrip("/") or "/"
        chain.append((cg, folder))
    return chain


def memory_limit(root: str | os.PathLike[str] = "/") -> MemoryLimit | None:
    """The cgroup memory limit that leaves this process the least room, or None without one."""
    best: MemoryLimit | None = None
    for h in hierarchies(root):
        if h.version == 1 and "memory" not in h.controllers:
            continue
        for cg, folder in _chain(h):
            if h.version == 2:
                limits = [(v, k) for k in ("memory.max", "memory.high")
                          if (v := _int(_read(folder / k))) is not None and v < UNLIMITED]
                usage = _int(_read(folder / "memory.current"))
                stat = _stat(folder / "memory.stat")
                reclaim = stat.get("inactive_file", 0)
            else:
                v = _int(_read(folder / "memory.limit_in_bytes"))
                limits = [(v, "memory.limit_in_bytes")] if v is not None and v < UNLIMITED else []
                usage = _int(_read(folder / "memory.usage_in_bytes"))
                stat = _stat(folder / "memory.stat")
                reclaim = stat.get("total_inactive_file", stat.get("inactive_file", 0))
            for value, key in limits:
                used = usage if usage is not None else 0
                lim = MemoryLimit(value, used, min(reclaim, used), h.version, cg, key)
                if best is None or lim.available < best.available:
                    best = lim
    return best


def cpu_limit(root: str | os.PathLike[str] = "/") -> CpuLimit | None:
    """The smallest CPU quota (in CPUs) over the process's cgroup and its ancestors, or None."""
    best: CpuLimit | None = None
    for h in hierarchies(root):
        if h.version == 1 and "cpu" not in h.controllers:
            continue
        for cg, folder in _chain(h):
            if h.version == 2:
                raw = (_read(folder / "cpu.max") or "").split()
                quota = _int(raw[0]) if raw else None
                period = _int(raw[1]) if len(raw) > 1 else 100000
                key = "cpu.max"
            else:
                quota = _int(_read(folder / "cpu.cfs_quota_us"))
                period = _int(_read(folder / "cpu.cfs_period_us"))
                key = "cpu.cfs_quota_us"
            if quota is None or quota <= 0 or not period:
                continue
            lim = CpuLimit(quota / period, h.version, cg, key)
            if best is None or lim.cpus < best.cpus:
                best = lim
    return best


def default_threads(cores: int, cpu: CpuLimit | None, affinity: int | None) -> int:
    """Compute threads with no --threads: the physical cores, no more than the CPUs this process
    may run on (its affinity) and the whole CPUs of its quota (a thread past the quota is throttled)."""
    n = max(cores, 1)
    if affinity:
        n = min(n, affinity)
    if cpu is not None:
        n = min(n, max(1, math.floor(cpu.cpus + 1e-9)))
    return n


def affinity() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
