"""The served model: the engine, its thread, its chat format and plan, and the token facts
replies need; and loading one as `coli serve` does.

    served = load_model(cfg)        # plan, engine, engine thread (started), chat format
    ...
    await close_model(served)       # finishes in-flight work, stops the thread
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from colibri import kernel_choice
from colibri.chat.builtin_templates import BY_ARCH, TURN_OPENERS
from colibri.chat.messages import Message
from colibri.chat.prompt import ChatFormat
from colibri.chat.template import ChatTemplate, TemplateRefused
from colibri.engine import Engine, GGUFFile
from colibri.errors import ContextExceeded
from colibri.models import id_of, resolve_model
from colibri.paths import cache_dir, kv_dir
from colibri.plan import Plan, draft_model_path, engine_draft_tokens, log_repack, make_plan
from colibri.serve_config import ServeConfig
from colibri.serving.engine_thread import EngineThread

log = logging.getLogger(__name__)


class ServedModel:
    """One loaded model: its engine thread, its chat format, the ids that matter to replies."""

    def __init__(self, model_id: str, engine: Engine, engine_thread: EngineThread, chat_format: ChatFormat,
                 arch: str, plan: Plan | None = None):
        self.model_id = model_id
        self.engine = engine
        self.engine_thread = engine_thread
        self.chat_format = chat_format
        self.arch = arch
        self.plan = plan  # how the model was placed (None when opened without one)
        self.created = int(time.time())
        self.turn_opener_ids = self._single_special_tokens(TURN_OPENERS)
        # tool syntax and think tags held as control tokens (Kimi's, DeepSeek's, GLM's) are shown: the parsers read them
        self.shown_control_ids = self._single_special_tokens(chat_format.markers)
        info = engine.model_info()
        self.n_ctx_train = int(info.get("n_ctx_train") or 0)  # the longest context the model was trained on
        self.n_params = int(info.get("n_params") or 0)
        self.moe_layers = self._moe_layers(info)  # the rows of the experts map
        self._bytes: dict[int, bytes] = {}

    @property
    def n_ctx(self) -> int:
        return self.engine_thread.n_ctx

    @property
    def n_slots(self) -> int:
        return self.engine_thread.n_slots

    def token_bytes(self, token: int) -> bytes:
        """A token's bytes (cached: the vocabulary does not change)."""
        data = self._bytes.get(token)
        if data is None:
            data = self._bytes[token] = self.engine.token_bytes(token, special=token in self.shown_control_ids)
        return data

    def token_text(self, token: int) -> str:
        return self.token_bytes(token).decode("utf-8", "replace")

    def _single_special_tokens(self, texts: tuple[str, ...]) -> frozenset[int]:
        ids = set()
        for text in texts:
            special = self.engine.tokenize(text, add_bos=False, special=True)
            if len(special) == 1 and special != self.engine.tokenize(text, add_bos=False, special=False):
                ids.add(special[0])
        return frozenset(ids)

    @staticmethod
    def _moe_layers(info: dict) -> list[int]:
        """Model layers that route to experts (the leading dense layers of DeepSeek-style models do not)."""
        n_layer, lead = int(info.get("n_layer") or 0), int(info.get("n_layer_dense_lead") or 0)
        return list(range(lead, n_layer)) if info.get("n_expert") else []

    # ---- prompts ---------------------------------------------------------------

    def tokenize_chat(self, text: str, messages: list[Message]) -> list[int]:
        """The rendered prompt's tokens: template markers as control tokens, while control-token
        text that a message itself contains stays plain text (no injected turns)."""
        bos = self.chat_format.template.bos_token if self.chat_format.template else ""
        add_bos = False if bos and text.startswith(bos) else None
        risky = [m.content.strip() for m in messages if m.content.strip() and self._has_special(m.content)]
        if not risky:
            return self.engine.tokenize(text, add_bos=add_bos, special=True)
        tokens = self.engine.tokenize("", add_bos=add_bos, special=False)
        cursor = 0
        for plain in risky:
            i = text.find(plain, cursor)
            if i < 0:
                continue
            tokens += self.engine.tokenize(text[cursor:i], add_bos=False, special=True)
            tokens += self.engine.tokenize(plain, add_bos=False, special=False)
            cursor = i + len(plain)
        return tokens + self.engine.tokenize(text[cursor:], add_bos=False, special=True)

    def _has_special(self, text: str) -> bool:
        return self.engine.tokenize(text, add_bos=False, special=True) != self.engine.tokenize(
            text, add_bos=False, special=False)

    def tokenize_completion(self, prompt: str) -> list[int]:
        # as llama.cpp's server: the model's BOS, and control tokens spelled in the prompt are parsed
        return self.engine.tokenize(prompt, add_bos=None, special=True)

    def check_fits(self, tokens: list[int], param: str) -> None:
        if len(tokens) >= self.n_ctx:
            raise ContextExceeded(len(tokens), self.n_ctx, param)


# ---- loading -------------------------------------------------------------------------

def chat_format_for(path: str, arch: str, engine: Engine) -> ChatFormat:
    """The GGUF's own tokenizer.chat_template, else colibri's built-in for the family, else none."""
    with GGUFFile(path) as g:
        source = g.get("tokenizer.chat_template")
    source = source or BY_ARCH.get(arch)
    if not source:
        return ChatFormat(None)
    bos = engine.token_bytes(engine.bos, special=True).decode("utf-8", "replace") if engine.bos >= 0 else ""
    eos = engine.token_bytes(engine.eos, special=True).decode("utf-8", "replace") if engine.eos >= 0 else ""
    try:
        return ChatFormat(ChatTemplate(source, bos_token=bos, eos_token=eos))
    except TemplateRefused as exc:
        log.warning("%s; chat completions are refused, /v1/completions works", exc)
        return ChatFormat(None)


def model_id_for(cfg: ServeConfig, path: Path) -> str:
    """--model-id, else the id of a model colibri fetched itself (the default, or one named by id),
    else the file's stem."""
    if cfg.model_id:
        return cfg.model_id
    return id_of(path) or path.stem


def load_model(cfg: ServeConfig, path: Path | None = None, model_id: str | None = None,
               before_open: Callable[[Plan], None] | None = None) -> ServedModel:
    """Plan the placement, open the engine with the server's slots and context, start its thread.
    path/model_id: a library model instead of --model (colibri.serving.pool); before_open runs
    between the plan and the engine's open (the pool reads the file there, with progress)."""
    path = path or resolve_model(cfg.model_path)
    draft_model = draft_model_path(cfg.draft_model)
    plan = make_plan(path, ctx=cfg.ctx or None, kv_slots=cfg.kv_slots, expert_cache_gb=cfg.expert_cache_gb,
                     pin_gb=cfg.pin_gb, draft_tokens=cfg.draft_tokens, draft_model=draft_model)
    if before_open:
        before_open(plan)
    if plan.placement == "streaming":
        log.warning("experts stream from disk: %.1f GiB cache + %.1f GiB pinned (%s%s)", plan.cache_bytes / (1 << 30),
                    plan.pin_bytes / (1 << 30), plan.reason, f"; {plan.memory_source}" if plan.memory_source else "")
    elif not plan.fits:
        log.warning("the model does not fit in available memory: %s", plan.reason)
    kernel_choice.choose(path)
    engine = Engine(path, n_ctx=plan.ctx, n_slots=cfg.kv_slots, n_threads=cfg.threads or plan.threads,
                    expert_cache_bytes=plan.cache_bytes, expert_pin_bytes=plan.pin_bytes, io_threads=cfg.io_threads,
                    direct_io=cfg.direct_io, prefetch=cfg.prefetch, expert_policy=cfg.expert_policy,
                    draft_tokens=engine_draft_tokens(cfg.draft_tokens), draft_model=draft_model)
    log_repack(engine)
    arch = engine.model_info().get("arch") or "unknown"
    thread = EngineThread(engine, persist_dir=kv_dir() if cfg.kv_persist else None, heat_dir=cache_dir() / "heat",
                          wake_interval=cfg.stream_interval_ms / 1000)
    thread.start()
    return ServedModel(model_id or model_id_for(cfg, Path(path)), engine, thread,
                       chat_format_for(str(path), arch, engine), arch, plan)


async def close_model(served: ServedModel) -> None:
    await served.engine_thread.close()  # finishes in-flight work, then stops the thread
