"""System One's prompt log-probs as an upstream engine gives them, for `coli serve --upstream`
(colibri.serving.upstream scores each option through the upstream's /v1/completions):

    rows = echoed_logprobs(reply, prompt)    # echo + logprobs (legacy completions: llama-cpp-python, SGLang, colibri)
    rows = prompt_logprobs(reply, prompt)    # vLLM's prompt_logprobs
    # [(character offset in the prompt, log-prob or None), ...] a prompt token each; None: not this prompt's
"""
from __future__ import annotations


def echoed_logprobs(reply: dict, prompt: str) -> list[tuple[int, float | None]] | None:
    """(character offset, log-prob) of each prompt token from an echo + logprobs completion; None when the
    reply has no echoed prompt."""
    choice = (reply.get("choices") or [{}])[0]
    lp = choice.get("logprobs") or {}
    offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
    n_prompt = int((reply.get("usage") or {}).get("prompt_tokens") or 0)
    if not offsets or not values or not n_prompt or not str(choice.get("text", "")).startswith(prompt):
        return None
    return list(zip(offsets[:n_prompt], values[:n_prompt]))


def prompt_logprobs(reply: dict, prompt: str) -> list[tuple[int, float | None]] | None:
    """(character offset, log-prob) of each prompt token from vLLM's `prompt_logprobs` (on the choice, or
    the reply in older versions): a list with one entry a prompt token, the first None (nothing before it),
    each else {token_id: {logprob, rank, decoded_token}} with the prompt's own token first. The offsets are
    counted back from the prompt's end by the decoded tokens' lengths (the first token's text is not given);
    None when there are no such entries or their text is not the prompt's."""
    choice = (reply.get("choices") or [{}])[0]
    rows = choice.get("prompt_logprobs") or reply.get("prompt_logprobs")
    if not isinstance(rows, list) or len(rows) < 2:
        return None
    out: list[tuple[int, float | None]] = []
    end = len(prompt)
    for row in reversed(rows[1:]):
        if not isinstance(row, dict) or not row:
            return None
        own = next(iter(row.values()))
        text = own.get("decoded_token") if isinstance(own, dict) else None
        if not isinstance(text, str) or not prompt[:end].endswith(text):
            return None
        end -= len(text)
        value = own.get("logprob")
        out.append((end, float(value) if isinstance(value, (int, float)) else None))
    out.append((0, None))  # the first token: no log-prob (nothing before it), its text before `end`
    return out[::-1]
