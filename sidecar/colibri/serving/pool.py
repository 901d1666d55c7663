"""Several models behind one server (`coli serve --models-dir DIR`): the library's models, loaded
when a request names one.

    pool = ModelPool(cfg, first)            # the model --model named (or the default), loaded
    release = await pool.use("other-id")    # waits for the switch (bounded by --queue-timeout)
    ...                                     # the request runs on pool.active
    release()

One model serves at a time: a request naming another waits, as in the queue,
until the requests on the active one have finished, then the pool makes the
named one active: at once when it is still resident, else after loading it
(the least recently used idle model is unloaded first when --max-models are
resident). A model idle for --model-ttl seconds is unloaded, the active one
excepted: it serves the next request that names no model. A switch resets the
scheduler's record of what each KV slot caches to the new model's.

The loading model, its phase and its bytes read are in snapshot() (/health
and the dashboard's Models page): before the engine opens a model whose plan
keeps it resident, the pool reads the file once through the page cache, so
the bytes are real progress and the engine's open then finds them in memory.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from colibri.errors import ColiError, EngineError, InvalidRequest, RequestError, Unavailable
from colibri.library import ModelEntry, scan
from colibri.library import verdicts
from colibri.library.discovery import plan_summary
from colibri.serve_config import ServeConfig
from colibri.serving.model import ServedModel, close_model, load_model
from colibri.serving.scheduler import QueueTimeout, Scheduler

log = logging.getLogger(__name__)

RESCAN_S = 10.0  # the library is read again at most this often (a new download shows up by itself)
READ_CHUNK = 8 << 20


class ModelNotFoundError(RequestError):
    """A request names a model the library does not have (OpenAI's 404 model_not_found)."""

    def __init__(self, name: str, known: list[str]):
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        super().__init__("model_not_found", f"the model {name!r} does not exist; this server has: {shown}",
                         param="model")


class ModelNotRunnable(InvalidRequest):
    def __init__(self, name: str, reason: str):
        super().__init__("model_not_runnable", f"the model {name!r} cannot run on this colibri: {reason}",
                         param="model")


class ModelLoadFailed(RequestError):
    def __init__(self, name: str, reason: str):
        super().__init__("model_load_failed", f"the model {name!r} failed to load: {reason}", param="model")


class ModelLoading(Unavailable):
    """No model is loaded for a moment: the one it replaces is gone, the named one still loading (503)."""

    def __init__(self, name: str):
        super().__init__("model_loading", f"the server is loading {name}; retry in a moment")


def parse_ttl(raw: str | float | int | None) -> float:
    """Seconds from "600", "90s", "10m", "2h"; 0, "", "0" or "never": never."""
    if raw is None:
        return 0.0
    if isinstance(raw, (int, float)):
        return float(raw)
    text = raw.strip().lower()
    if text in ("", "0", "never", "off"):
        return 0.0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h)?", text)
    if not m:
        raise ColiError(f"--model-ttl {raw!r}: give seconds, or a number with s, m or h (e.g. 10m)")
    return float(m[1]) * {"s": 1, "m": 60, "h": 3600, None: 1}[m[2]]


def _give_back(done: asyncio.Future) -> None:
    """A switch whose request is gone: the count it took on the model is released."""
    if not done.cancelled() and done.exception() is None:
        done.result()()


class ActiveModel:
    """What app[model_key] holds with a pool: every attribute is the active model's."""

    def __init__(self, pool: "ModelPool"):
        object.__setattr__(self, "_pool", pool)

    def __getattr__(self, name: str):
        return getattr(self._pool.active, name)


class ModelPool:
    def __init__(self, cfg: ServeConfig, first: ServedModel, scheduler: Scheduler | None = None):
        self.cfg = cfg
        self.max_models = max(1, cfg.max_models)
        self.ttl = cfg.model_ttl
        self.resident: OrderedDict[str, ServedModel] = OrderedDict([(first.model_id, first)])  # LRU first
        self.last_used: dict[str, float] = {first.model_id: time.monotonic()}
        self.active_id = first.model_id
        self.scheduler = scheduler
        self.on_switch: list[Callable[[ServedModel], None]] = []  # e.g. the serving core's model
        self.users = 0  # requests running on the active model
        self.loading: dict | None = None
        self.last_error: dict | None = None
        self.switches = 0
        self._switch = asyncio.Lock()
        self._idle = asyncio.Condition()
        self._entries: list[ModelEntry] = []
        self._scanned = 0.0
        self._first_path, self._first_id = str(Path(first.engine.path).resolve()), first.model_id
        self._paths: dict[str, Path] = {first.model_id: Path(first.engine.path)}  # every model loaded once
        self._reaper: asyncio.Task | None = None

    @property
    def active(self) -> ServedModel:
        """The model serving now; while one replaces it (--max-models reached), a 503 model_loading."""
        served = self.resident.get(self.active_id)
        if served is None:
            raise ModelLoading(self.loading["model"] if self.loading else self.active_id)
        return served

    # ---- the library -------------------------------------------------------------

    def entries(self, fresh: bool = False) -> list[ModelEntry]:
        """The library's models (read again when older than RESCAN_S); the first model's file goes by
        the id it was served under (--model-id, or its catalog id)."""
        if fresh or time.monotonic() - self._scanned > RESCAN_S:
            entries = scan(list(self.cfg.models_dirs))
            for e in entries:
                if str(e.path.resolve()) == self._first_path:
                    e.id = self._first_id
            self._entries = entries
            self._scanned = time.monotonic()
        return self._entries

    def ids(self) -> list[str]:
        return list(dict.fromkeys([*self.resident, self._first_id,
                                   *(e.id for e in self.entries() if e.runnable is not False)]))

    def entry(self, name: str) -> ModelEntry | None:
        for fresh in (False, True):  # a file that just arrived: read the folders once more
            for e in self.entries(fresh):
                if e.id == name:
                    return e
        return None

    # ---- using a model -------------------------------------------------------------

    async def use(self, name: str | None) -> Callable[[], None]:
        """Make `name` the active model (None: the active one) and count this request on it until the
        returned release is called. Waits at most the queue timeout (429 queue_timeout)."""
        name = name or self.active_id
        if name == self.active_id and not self._switch.locked():
            return self._enter()
        if name not in self.resident and name not in self._paths:
            e = self.entry(name)
            if e is None:
                raise ModelNotFoundError(name, self.ids())
            if e.runnable is False:
                raise ModelNotRunnable(name, e.reason)
        timeout = self.scheduler.queue_timeout if self.scheduler else self.cfg.queue_timeout
        # In turn (FIFO on the lock): switch if need be, and count this request on the model before the
        # lock goes to the next one. The switch runs on when this request gives up (timeout, client
        # gone): a load is never cut halfway, and the count it took is given back at once.
        switch = asyncio.ensure_future(self._switch_to(name))
        try:
            return await asyncio.wait_for(asyncio.shield(switch), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            switch.add_done_callback(_give_back)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise QueueTimeout(timeout) from None

    def _enter(self) -> Callable[[], None]:
        self.users += 1
        model_id = self.active_id
        self.last_used[model_id] = time.monotonic()
        done = False

        def release() -> None:
            nonlocal done
            if done:
                return
            done = True
            self.users -= 1
            self.last_used[model_id] = time.monotonic()
            asyncio.get_running_loop().create_task(self._notify())

        return release

    async def _notify(self) -> None:
        async with self._idle:
            self._idle.notify_all()

    async def _switch_to(self, name: str) -> Callable[[], None]:
        """Make `name` active (after the running requests) and count one request on it."""
        async with self._switch:
            if name == self.active_id:
                return self._enter()
            async with self._idle:  # the requests on the active model finish first
                await self._idle.wait_for(lambda: self.users == 0)
            if name not in self.resident:
                before = self.active_id
                await self._make_room()
                try:
                    self.resident[name] = await self._load(name)
                except ColiError:
                    if before not in self.resident:  # the model it replaced comes back: a server always has one
                        self.resident[before] = await self._load(before)
                        self._activate(before)
                    raise
            self.resident.move_to_end(name)
            self._activate(name)
            return self._enter()

    def _activate(self, name: str) -> None:
        served = self.resident[name]
        self.active_id = name
        self.last_used[name] = time.monotonic()
        self.switches += 1
        if self.scheduler is not None:  # what each slot caches is now the new model's
            for slot in range(served.n_slots):
                try:
                    tokens = served.engine.slot_tokens(slot)
                except EngineError:
                    tokens = []
                self.scheduler.remember(slot, tokens)
        for hook in self.on_switch:
            hook(served)
        log.info("serving %s now", name)

    async def _make_room(self) -> None:
        """Unload the least recently used models until one more fits; the active one too, when it must
        go (then, until the next one is loaded, what reads the model gets a 503 model_loading)."""
        while len(self.resident) >= self.max_models:
            victim = next(iter(self.resident))  # least recently used (the active one is idle here)
            await self._unload(victim)

    async def unload(self, name: str) -> bool:
        """Unload a loaded model other than the active one (the dashboard's Unload, --model-ttl); in turn
        with the switches, so a switch never finds gone the model it was about to make active."""
        async with self._switch:
            if name not in self.resident or name == self.active_id:
                return False
            return await self._unload(name)

    async def _unload(self, name: str) -> bool:
        served = self.resident.pop(name)
        self.last_used.pop(name, None)
        log.info("unloading %s", name)
        await close_model(served)
        served.engine.close()
        return True

    async def load(self, name: str) -> None:
        """Load a model and make it the active one (the dashboard's Load button)."""
        release = await self.use(name)
        release()  # the model stays active: the next request that names none runs on it

    async def _load(self, name: str) -> ServedModel:
        path = self._paths.get(name)
        if path is None:
            e = self.entry(name)
            if e is None:
                raise ModelNotFoundError(name, self.ids())
            path = e.path
        t0 = time.monotonic()
        self.loading = {"model": name, "phase": "planning", "bytes_done": 0, "bytes_total": path.stat().st_size,
                        "started": time.time()}
        loop = asyncio.get_running_loop()
        try:
            served = await loop.run_in_executor(None, lambda: load_model(self.cfg, path, name, self._read_ahead))
        except ColiError as exc:
            if isinstance(exc, EngineError):
                verdicts.record(path, False, str(exc))
            self.last_error = {"model": name, "message": str(exc), "at": time.time()}
            self._scanned = 0.0  # the list shows the verdict
            raise ModelLoadFailed(name, str(exc)) from exc
        finally:
            self.loading = None
        verdicts.record(path, True, "the engine loaded it")
        self._paths[name] = path
        log.info("loaded %s in %.2f s", name, time.monotonic() - t0)
        return served

    def _read_ahead(self, plan) -> None:
        """Read a resident model's file once (page cache) with progress; a streamed one is opened as is."""
        loading = self.loading
        if loading is None:
            return
        if plan.placement != "resident" or not plan.fits:
            loading["phase"] = "opening"
            return
        loading["phase"] = "reading"
        with open(plan.model, "rb", buffering=0) as f:
            while chunk := f.read(READ_CHUNK):
                loading["bytes_done"] += len(chunk)
        loading["phase"] = "opening"

    # ---- idle models -----------------------------------------------------------------

    def start(self) -> None:
        if self.ttl > 0 and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(max(0.5, min(self.ttl / 4, 30.0)))
            now = time.monotonic()
            for name in list(self.resident):
                if name != self.active_id and now - self.last_used.get(name, now) >= self.ttl:
                    try:
                        await self.unload(name)
                    except Exception:  # noqa: BLE001 - the reaper lives on; the next round tries again
                        log.exception("could not unload idle model %s", name)

    async def close(self) -> None:
        if self._reaper:
            self._reaper.cancel()
        for name in list(self.resident):
            served = self.resident.pop(name)
            await close_model(served)

    # ---- what the API and the dashboard show -------------------------------------------

    def snapshot(self) -> dict:
        return {"active": self.active_id, "resident": list(self.resident), "max_models": self.max_models,
                "model_ttl_seconds": self.ttl, "loading": dict(self.loading) if self.loading else None,
                "last_error": self.last_error, "switches": self.switches}

    def listing(self, with_plans: bool = False) -> list[dict]:
        """Every model: the resident ones first (loaded), then the library's (with runnable and reason)."""
        rows = []
        by_path = {str(e.path.resolve()): e for e in self.entries()}
        for name, served in self.resident.items():
            found = by_path.get(str(Path(served.engine.path).resolve()))
            row = found.as_dict() if found else {"path": str(served.engine.path)}
            row.update({"id": name, "state": "active" if name == self.active_id else "loaded",
                        "arch": served.arch, "n_params": served.n_params, "n_ctx": served.n_ctx,
                        "n_ctx_train": served.n_ctx_train, "runnable": True, "reason": "loaded",
                        "plan": plan_summary(served.plan) if served.plan else None})
            rows.append(row)
        for e in self.entries():
            if e.id in self.resident:
                continue
            plan = None
            if with_plans and e.runnable is not False:
                try:
                    plan = e.plan(kv_slots=self.cfg.kv_slots, ctx=self.cfg.ctx or None)
                except ColiError as exc:
                    e.runnable, e.reason = False, str(exc)
            row = e.as_dict(plan)
            row["state"] = "loading" if self.loading and self.loading["model"] == e.id else "available"
            rows.append(row)
        return rows
