"""llama.cpp in a process of its own, for files it may abort on (a GGML_ASSERT ends the
process, not the call): one JSON request per line on stdin, one answer per line on stdout.

Request: {"path", "tokens", "text", "out"}. Answer: {"loaded": false, "error"} when llama.cpp
refuses the file, else {"loaded": true, "bos", "eos", "text_tokens"} with the logits of every
position of `tokens` saved to `out` (.npy). Started by tests/engine/test_conformance.py.
"""
from __future__ import annotations

import ctypes
import json
import sys


def main() -> None:
    import numpy as np

    import llama_cpp

    log: list[str] = []

    @llama_cpp.llama_log_callback
    def keep(level, text, user_data):
        line = text.decode("utf-8", "replace").strip()
        if line and ("error" in line or "exception" in line or "failed" in line):
            log.append(line)

    llama_cpp.llama_log_set(keep, ctypes.c_void_p(0))
    for line in sys.stdin:
        req = json.loads(line)
        log.clear()
        try:
            llm = llama_cpp.Llama(model_path=req["path"], n_ctx=max(64, len(req["tokens"]) + 8), n_threads=2,
                                  n_threads_batch=2, logits_all=True, flash_attn=False, verbose=False)
        except Exception as e:  # noqa: BLE001 - its refusal is the answer
            print(json.dumps({"loaded": False, "error": (log[0] if log else str(e))[:300]}), flush=True)
            continue
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        llm.eval(req["tokens"])
        np.save(req["out"], np.array(llm.scores[:len(req["tokens"])], dtype=np.float32))
        answer = {"loaded": True, "bos": llama_cpp.llama_vocab_bos(vocab), "eos": llama_cpp.llama_vocab_eos(vocab),
                  "text_tokens": llm.tokenize(req["text"].encode(), add_bos=True, special=False)}
        del llm
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
