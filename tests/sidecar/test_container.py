"""Container limits (colibri.container): cgroup v1 and v2 memory limits and CPU quotas, read from
fake cgroup trees (pure functions over a root folder), then from a real cgroup v1 child with a
900 MiB limit that `coli plan` and `coli generate` run inside."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from colibri import container
from colibri.plan import GIB, MIB, MIN_CGROUP_MARGIN, make_plan
from tests.fixtures import moe_models

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_CGROUP = "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n"
NO_LIMIT_V1 = "9223372036854771712"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v1_tree(root: Path, *, limit: str, parent_limit: str = NO_LIMIT_V1, usage: int = 0, inactive: int = 0,
            quota: str = "-1", period: str = "100000") -> Path:
    write(root, "proc/self/mountinfo", V1_MOUNTS)
    write(root, "proc/self/cgroup", V1_CGROUP)
    mem = "sys/fs/cgroup/memory"
    write(root, f"{mem}/memory.limit_in_bytes", NO_LIMIT_V1)
    write(root, f"{mem}/docker/memory.limit_in_bytes", parent_limit)
    write(root, f"{mem}/docker/memory.usage_in_bytes", str(usage * 2))
    write(root, f"{mem}/docker/abc/memory.limit_in_bytes", limit)
    write(root, f"{mem}/docker/abc/memory.usage_in_bytes", str(usage))
    write(root, f"{mem}/docker/abc/memory.stat", f"cache 123\ninactive_file 7\ntotal_inactive_file {inactive}\n")
    write(root, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", quota)
    write(root, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", period)
    return root


def v2_tree(root: Path, *, leaf: dict[str, str], parent: dict[str, str], mount_root: str = "/") -> Path:
    write(root, "proc/self/mountinfo", f"29 23 0:26 {mount_root} /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n")
    write(root, "proc/self/cgroup", "0::/system.slice/app.service\n")
    base = "sys/fs/cgroup" if mount_root == "/" else "sys/fs/cgroup/_outside"
    for rel, files in (("system.slice/app.service", leaf), ("system.slice", parent)):
        for name, text in files.items():
            write(root, f"{base}/{rel}/{name}", text)
    return root


def test_v1_limit_usage_and_reclaimable_page_cache(tmp_path):
    v1_tree(tmp_path, limit=str(900 * MIB), usage=300 * MIB, inactive=100 * MIB)
    lim = container.memory_limit(tmp_path)
    assert (lim.version, lim.cgroup, lim.key, lim.limit) == (1, "/docker/abc", "memory.limit_in_bytes", 900 * MIB)
    assert lim.available == (900 - 300 + 100) * MIB  # total_inactive_file (the hierarchy's) counts, not inactive_file


def test_v1_unlimited_values_are_no_limit_and_an_ancestor_can_set_the_lower_one(tmp_path):
    v1_tree(tmp_path, limit=NO_LIMIT_V1, usage=10 * MIB)
    assert container.memory_limit(tmp_path) is None
    v1_tree(tmp_path / "b", limit=str(2 * GIB), parent_limit=str(GIB), usage=100 * MIB)
    lim = container.memory_limit(tmp_path / "b")
    assert lim.cgroup == "/docker" and lim.limit == GIB and lim.usage == 200 * MIB  # the parent is charged for both


def test_v2_max_high_and_the_nearest_ancestor_that_binds(tmp_path):
    v2_tree(tmp_path, leaf={"memory.max": "max", "memory.high": "max", "memory.current": str(50 * MIB),
                            "memory.stat": f"anon 1\nfile 9\ninactive_file {10 * MIB}\n"},
            parent={"memory.max": str(900 * MIB), "memory.current": str(400 * MIB),
                    "memory.stat": f"inactive_file {100 * MIB}\n"})
    lim = container.memory_limit(tmp_path)
    assert (lim.version, lim.cgroup, lim.key) == (2, "/system.slice", "memory.max")
    assert lim.available == (900 - 400 + 100) * MIB
    v2_tree(tmp_path / "b", leaf={"memory.high": str(700 * MIB)}, parent={})  # memory.high throttles: a limit too
    lim = container.memory_limit(tmp_path / "b")
    assert (lim.cgroup, lim.key, lim.limit) == ("/system.slice/app.service", "memory.high", 700 * MIB)


def test_v2_in_a_cgroup_namespace_reads_the_mount_top(tmp_path):
    """Docker with a private cgroup namespace: /proc/self/cgroup says 0::/ and the mount shows it at /."""
    write(tmp_path, "proc/self/mountinfo", "29 23 0:26 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n")
    write(tmp_path, "proc/self/cgroup", "0::/\n")
    write(tmp_path, "sys/fs/cgroup/memory.max", str(512 * MIB))
    write(tmp_path, "sys/fs/cgroup/memory.current", str(12 * MIB))
    write(tmp_path, "sys/fs/cgroup/cpu.max", "150000 100000")
    lim = container.memory_limit(tmp_path)
    assert lim.limit == 512 * MIB and lim.available == 500 * MIB and lim.cgroup == "/"
    assert container.cpu_limit(tmp_path).cpus == 1.5


def test_v1_in_docker_reads_the_mount_top(tmp_path):
    """Docker without a cgroup namespace: the mount shows /docker/abc at its top, /proc/self/cgroup names it."""
    write(tmp_path, "proc/self/mountinfo", "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n")
    write(tmp_path, "proc/self/cgroup", "4:memory:/docker/abc\n")
    write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", str(GIB))
    write(tmp_path, "sys/fs/cgroup/memory/memory.usage_in_bytes", str(GIB // 4))
    lim = container.memory_limit(tmp_path)
    assert (lim.cgroup, lim.limit, lim.available) == ("/docker/abc", GIB, GIB * 3 // 4)


def test_no_cgroup_files_is_no_limit(tmp_path):
    assert container.memory_limit(tmp_path) is None and container.cpu_limit(tmp_path) is None
    write(tmp_path, "proc/self/cgroup", "0::/\n")  # a cgroup but no mount seen
    assert container.memory_limit(tmp_path) is None


def test_cpu_quota_sets_the_default_threads(tmp_path):
    v1_tree(tmp_path, limit=NO_LIMIT_V1, quota="150000", period="100000")
    cpu = container.cpu_limit(tmp_path)
    assert (cpu.version, cpu.key, cpu.cpus) == (1, "cpu.cfs_quota_us", 1.5)
    assert container.default_threads(8, cpu, None) == 1  # whole CPUs of the quota
    assert container.default_threads(8, None, 3) == 3  # the affinity
    assert container.default_threads(2, None, None) == 2
    v1_tree(tmp_path / "b", limit=NO_LIMIT_V1, quota="-1")
    assert container.cpu_limit(tmp_path / "b") is None
    v2_tree(tmp_path / "c", leaf={"cpu.max": "max 100000"}, parent={"cpu.max": "400000 100000"})
    cpu = container.cpu_limit(tmp_path / "c")
    assert cpu.cpus == 4.0 and cpu.cgroup == "/system.slice"


def test_the_plan_streams_within_a_fake_v2_cap():
    """make_plan over a fake tree: the 900 MiB limit replaces the host's available memory."""
    path = moe_models.tiny("qwen3moe", "Q8_0")
    host = make_plan(path, ctx=256)
    assert host.placement == "resident" and host.memory_limit == 0
    # room for the margin, the dense part, the KV and 7/8 of the experts
    budget = host.expert_bytes * 7 // 8
    cap = MIN_CGROUP_MARGIN + host.dense_bytes + host.kv_bytes_per_slot + budget
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        v2_tree(root, leaf={"memory.max": str(cap), "memory.current": "0", "cpu.max": "100000 100000"}, parent={})
        plan = make_plan(path, ctx=256, cgroup_root=root)
        one_shot = make_plan(path, ctx=256, cgroup_root=root, learned_heat=False)
        short = make_plan(path, ctx=256, cgroup_root=root, learned_heat=False, kv_tokens=64)
    assert plan.memory_limit == cap and plan.memory_source.startswith("container memory limit")
    assert plan.ram_available == cap and plan.margin == MIN_CGROUP_MARGIN
    assert plan.threads == 1 and plan.cpu_quota == 1.0
    assert plan.placement == "streaming" and plan.fits
    assert plan.cache_bytes + plan.pin_bytes == budget and plan.pin_bytes == budget - budget * 3 // 4
    # `coli generate`: nothing to pin without learned heat; only the KV its tokens can write is counted,
    # here 3/4 of the context's, room enough for every expert
    assert one_shot.placement == "streaming" and one_shot.pin_bytes == 0 and one_shot.cache_bytes == budget
    assert short.placement == "resident" and short.fits


# ---- a real cgroup v1 child with a 900 MiB limit ----

V1_MEMORY = Path("/sys/fs/cgroup/memory")
CAP = 900 * MIB


def capped_fixture() -> Path:
    """A real qwen3moe file bigger than the cap: the bench model's shape in F32, 3 layers (~1.2 GB)."""
    return moe_models.cached(moe_models.bench_config("qwen3moe", "F32", n_layer=3), label="capped")


@pytest.fixture
def v1_cgroup():
    if not (V1_MEMORY / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
    group = V1_MEMORY / f"colibri-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(CAP))
    except OSError as exc:
        pytest.skip(f"the cgroup v1 memory hierarchy is not writable here: {exc}")
    try:
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():  # none once our children have exited
            (V1_MEMORY / "cgroup.procs").write_text(pid)
        group.rmdir()


def run_capped(group: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`coli ARGS` inside the cgroup: the shell joins it, then becomes coli."""
    cmd = f'echo $$ > {group}/cgroup.procs && exec "$@"'
    return subprocess.run(["sh", "-c", cmd, "sh", sys.executable, "-m", "colibri", *args], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


def test_plan_and_generate_stream_inside_a_real_900_mib_cgroup(v1_cgroup):
    path = capped_fixture()
    assert path.stat().st_size > CAP
    r = run_capped(v1_cgroup, "-v", "plan", "--model", str(path))
    assert r.returncode == 0, r.stderr
    assert "container memory limit 900 MiB (cgroup v1)" in r.stdout, r.stdout
    assert "placement    streaming" in r.stdout
    assert "cgroup v1 memory: memory.limit_in_bytes is 943718400 bytes" in r.stderr  # -v tells the numbers
    plan = json.loads(run_capped(v1_cgroup, "plan", "--model", str(path), "--json").stdout)
    assert plan["memory_limit"] == CAP and plan["ram_available"] < CAP
    assert plan["placement"] == "streaming" and plan["fits"]
    assert plan["dense_bytes"] + plan["cache_bytes"] + plan["pin_bytes"] < CAP
    # no flags: generate opens the engine as planned, so the experts stream inside the cap
    r = run_capped(v1_cgroup, "-v", "generate", "--model", str(path), "-p", "hello", "-n", "8", "--ignore-eos",
                   "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert len(out["tokens"]) == 8
    assert "experts stream from disk" in r.stderr and "container memory limit 900 MiB" in r.stderr


def test_serve_streams_inside_a_real_900_mib_cgroup(v1_cgroup):
    """`coli serve` with no flags in the cap: the plan streams the experts, and a completion decodes."""
    path = capped_fixture()
    cmd = f'echo $$ > {v1_cgroup}/cgroup.procs && exec "$@"'
    env = {**os.environ, "COLI_KV_PERSIST": "0"}
    proc = subprocess.Popen(["sh", "-c", cmd, "sh", sys.executable, "-m", "colibri", "serve", "--model", str(path),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("colibri: serving"):
                break
        log = "".join(lines)
        assert "experts stream from disk" in log and "container memory limit 900 MiB (cgroup v1)" in log, log
        url = re.search(r"at (http://\S+/v1)", log).group(1)
        body = json.dumps({"model": path.stem, "prompt": "hello", "max_tokens": 4, "temperature": 0}).encode()
        req = urllib.request.Request(url + "/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            out = json.loads(resp.read())
        assert out["usage"]["completion_tokens"] == 4
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def v1_cpu_cgroup():
    root = Path("/sys/fs/cgroup/cpu")
    if not (root / "cpu.cfs_quota_us").exists():
        pytest.skip("no cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    group = root / f"colibri-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("100000")  # one CPU
    except OSError as exc:
        pytest.skip(f"the cgroup v1 cpu hierarchy is not writable here: {exc}")
    try:
        yield group
    finally:
        group.rmdir()


def test_plan_takes_threads_from_a_real_cpu_quota(v1_cpu_cgroup):
    path = moe_models.tiny("qwen3moe", "Q8_0")
    r = run_capped(v1_cpu_cgroup, "plan", "--model", str(path), "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["cpu_quota"] == 1.0 and plan["threads"] == 1
