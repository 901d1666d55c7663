"""engine/src/tokenizer*.c against llama.cpp (llama-cpp-python, vocab_only).

- Gemma 3 (the default model): SentencePiece-style BPE with byte fallback,
  262,144 tokens, user-defined whitespace tokens, control tokens.
- Byte-level BPE vocabularies written here (merges trained on the corpus),
  one per pre-tokenizer name colibri supports.
- Gemma 4's "gemma4" tokenizer (SentencePiece-style BPE: spaces as U+2581,
  raw UTF-8 with <0xXX> byte fallback, lines apart) written as its converter
  writes it, and the pre-tokenizers that share its rules.
Both: every text of the corpus (Unicode, emoji, code, whitespace runs, long
numbers, control-token look-alikes, invalid UTF-8) with and without special
parsing and BOS, every token's bytes, the end-of-generation set; then the
round trip, bad vocabularies, the C API's buffer rules and speed.
"""
from __future__ import annotations

import ctypes
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from tests.conftest import ROOT, run_coli

from .tokenizer_fixtures import (
    CORPUS, GEMMA4_CONTROL, GEMMA4_NEWLINE_RUNS, bpe_vocab, corpus_bytes, gemma4_vocab, long_text, random_texts,
    train_bpe, write_vocab_gguf,
)

llama_cpp = pytest.importorskip("llama_cpp")

BPE_PRES = ["default", "qwen2", "llama-bpe", "olmo", "gpt-2", "starcoder", "smaug-bpe", "glm4", "glm5", "chatglm-bpe",
            "qwen35", "deepseek-v3", "deepseek-llm", "deepseek-coder", "gpt-4o", "tekken", "kimi-k2", "bailingmoe"]
# whole words as tokens that the merges never build: a pre-tokenizer with ignore_merges (llama-bpe, tekken,
# glm4/glm5) takes them whole, the others merge their way to other tokens
WHOLE_WORDS = ["\u0120Hello", "\u0120world", "Mixture", "\u0120experts", "\u0120dog", "\u0120THE", "\u0120quick"]
# llama.cpp runs their regexes through std::regex
SLOW_REFERENCE = {"gpt-4o", "tekken", "deepseek-llm", "deepseek-coder"}
BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>"]
N_RANDOM = 400


# ---- the reference -------------------------------------------------------------

@llama_cpp.llama_log_callback
def _quiet(level, text, user_data):  # llama.cpp logs warnings per call otherwise
    pass


llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))


class Reference:
    """llama.cpp's vocabulary of one file, through its C API."""

    def __init__(self, path: Path):
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self._buf = ctypes.create_string_buffer(1 << 16)

    def tokenize(self, data: bytes, add_special: bool, parse_special: bool) -> list[int]:
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), None, 0, add_special, parse_special)
        n = -n if n < 0 else n
        out = (llama_cpp.llama_token * max(n, 1))()
        k = llama_cpp.llama_tokenize(self.vocab, data, len(data), out, n, add_special, parse_special)
        assert k == n
        return list(out[:n])

    def piece(self, tok: int, special: bool) -> bytes:
        n = llama_cpp.llama_token_to_piece(self.vocab, tok, self._buf, len(self._buf), 0, special)
        return self._buf.raw[:n]

    def is_eog(self, tok: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, tok))


def llama_safe(data: bytes) -> bool:
    """False for byte strings llama.cpp's BPE path cannot take: a 4-byte sequence
    past U+10FFFF makes it throw (std::terminate); colibri reads it as U+FFFDs."""
    for i, b in enumerate(data):
        if 0xF5 <= b <= 0xF7 or (b == 0xF4 and i + 1 < len(data) and data[i + 1] >= 0x90):
            return False
    return True


def _case_mixes(n: int, seed: int) -> list[bytes]:
    """Short strings of the characters the regexes treat differently: cases
    (ASCII, non-ASCII, titlecase), contractions, marks, digits, CJK and kana,
    symbols, Unicode spaces, line breaks."""
    alpha = ["A", "b", "É", "é", "ß", "ǅ", "'", "s", "S", "t", "T", "l", "L", " ", "  ", "1", "12", "1234", "\n",
             "\r\n", "/", "ä", "\u0301", "\u0308", "~", ".", "$", "€", "日", "カ", "ひ", "\u3000", "\t", "!", "-",
             "_", "ℌ", "Ⅻ", "²", "\u00a0", "x", "Y", "😀", "\u200d"]
    rng = random.Random(seed)
    return ["".join(rng.choice(alpha) for _ in range(rng.randint(1, 25))).encode() for _ in range(n)]


def compare_tokenize(eng: Engine, ref: Reference, texts: list[bytes]) -> tuple[int, int, list]:
    """(cases, mismatches, first few mismatches) over texts x special x add_bos."""
    cases, bad, examples = 0, 0, []
    for data in texts:
        for special in (False, True):
            for add in (False, True):
                cases += 1
                want = ref.tokenize(data, add, special)
                got = eng.tokenize(data, add_bos=None if add else False, special=special)
                if got != want:
                    bad += 1
                    if len(examples) < 5:
                        examples.append((data[:60], special, add, want[:20], got[:20]))
    return cases, bad, examples


# ---- fixtures ------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemma_path(default_model) -> Path:
    return default_model


@pytest.fixture(scope="module")
def gemma(gemma_path):
    with Engine(gemma_path, vocab_only=True) as e:
        yield e


@pytest.fixture(scope="module")
def gemma_ref(gemma_path):
    return Reference(gemma_path)


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory) -> Path:
    """One byte-level BPE vocabulary, written once per pre-tokenizer name."""
    d = tmp_path_factory.mktemp("bpe")
    merges = train_bpe("\n".join(CORPUS), 400)
    tokens, types = bpe_vocab(merges, BPE_SPECIALS)
    tokens.append("<user_tag>")  # user-defined: matched even without special parsing
    types.append(4)
    for w in WHOLE_WORDS:
        if w not in tokens:
            tokens.append(w)
            types.append(1)
    eos = tokens.index("<|endoftext|>")
    for pre in BPE_PRES:
        write_vocab_gguf(d / f"{pre}.gguf", model="gpt2", tokens=tokens, types=types,
                         merges=[a + " " + b for a, b in merges], pre=pre,
                         extra={"tokenizer.ggml.bos_token_id": ("uint32", eos),
                                "tokenizer.ggml.eos_token_id": ("uint32", eos)})
    return d


@pytest.fixture(scope="module")
def fuzz_texts() -> list[bytes]:
    import random

    rng = random.Random(99)
    out = [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    return [b for b in out if llama_safe(b)]


# ---- Gemma 3 (SPM) ----------------------------------------------------------------

def test_gemma_vocabulary(gemma, gemma_ref):
    assert gemma.n_vocab == gemma_ref.n_vocab == 262144
    assert gemma.bos == llama_cpp.llama_vocab_bos(gemma_ref.vocab) == 2
    assert gemma.eos == llama_cpp.llama_vocab_eos(gemma_ref.vocab) == 1
    eog = [t for t in range(gemma.n_vocab) if gemma.is_eog(t)]
    assert eog == [t for t in range(gemma_ref.n_vocab) if gemma_ref.is_eog(t)]
    assert 106 in eog  # <end_of_turn>


def test_gemma_corpus_matches_llama_cpp(gemma, gemma_ref, fuzz_texts):
    texts = corpus_bytes() + random_texts(N_RANDOM) + fuzz_texts
    cases, bad, examples = compare_tokenize(gemma, gemma_ref, texts)
    print(f"gemma: {cases} tokenizations, {bad} mismatches")
    assert bad == 0, examples


def test_gemma_token_bytes_match_llama_cpp(gemma, gemma_ref):
    bad = [(t, s) for t in range(gemma.n_vocab) for s in (False, True)
           if gemma.token_bytes(t, special=s) != gemma_ref.piece(t, s)]
    assert not bad, bad[:10]


def test_control_tokens_only_when_asked(gemma):
    text = "<start_of_turn>user\nhi<end_of_turn>\n<bos>"
    plain = gemma.tokenize(text, add_bos=False, special=False)
    parsed = gemma.tokenize(text, add_bos=False, special=True)
    assert 105 not in plain and 106 not in plain and 2 not in plain
    assert parsed[0] == 105 and 106 in parsed and parsed[-1] == 2
    assert gemma.detokenize(plain) == text.encode()
    assert gemma.detokenize(parsed) == b"user\nhi\n"  # control tokens: no bytes unless asked
    assert gemma.detokenize(parsed, special=True) == text.encode()


def test_bos_and_empty_text(gemma):
    assert gemma.tokenize(b"", add_bos=False) == []
    assert gemma.tokenize(b"") == [gemma.bos]  # add_bos_token is true for Gemma
    assert gemma.tokenize(b"", add_bos=True) == [gemma.bos]
    assert gemma.tokenize("hi", add_bos=True)[0] == gemma.bos


def test_gemma_round_trip(gemma):
    for text in CORPUS + [t.decode() for t in random_texts(200)]:
        data = text.encode()
        assert gemma.detokenize(gemma.tokenize(data, add_bos=False)) == data, text[:60]


def test_invalid_utf8_is_tokenized_byte_exact(gemma):
    for data in [b"\xff\xfe", b"abc\x80def", b"\xe6\x97", b"\xc0\x80", b"\xf5\x80\x80\x80"]:
        toks = gemma.tokenize(data, add_bos=False)
        assert toks and gemma.detokenize(toks) == data  # byte fallback keeps every byte


# ---- byte-level BPE ----------------------------------------------------------------

@pytest.mark.parametrize("pre", BPE_PRES)
def test_bpe_matches_llama_cpp(bpe_dir, pre, fuzz_texts):
    path = bpe_dir / f"{pre}.gguf"
    ref = Reference(path)
    with Engine(path, vocab_only=True) as eng:
        n = N_RANDOM // 4 if pre in SLOW_REFERENCE else N_RANDOM
        texts = corpus_bytes() + random_texts(n, seed=len(pre)) + fuzz_texts + _case_mixes(n, len(pre))
        cases, bad, examples = compare_tokenize(eng, ref, texts)
        print(f"{pre}: {cases} tokenizations, {bad} mismatches")
        assert bad == 0, examples
        assert eng.n_vocab == ref.n_vocab
        for t in range(eng.n_vocab):
            for s in (False, True):
                assert eng.token_bytes(t, special=s) == ref.piece(t, s), (t, s)
            assert eng.is_eog(t) == ref.is_eog(t), t


@pytest.mark.parametrize("pre", ["gpt-2", "default", "deepseek-v3", "deepseek-llm", "deepseek-coder"])
def test_unicode_categories_match_llama_cpp(bpe_dir, pre):
    """Letters, numbers, whitespace and punctuation as llama.cpp classifies them
    (engine/tools/gen_unicode.py): code points in contexts whose split depends on
    their class. All of Latin-1 and every 13th code point beyond (every code
    point was checked when the table was generated)."""
    path = bpe_dir / f"{pre}.gguf"
    ref = Reference(path)
    cps = [c for c in list(range(0x100)) + list(range(0x100, 0x110000, 13)) if not 0xD800 <= c < 0xE000]
    with Engine(path, vocab_only=True) as eng:
        for i in range(0, len(cps), 256):
            data = "".join(f"x{chr(c)}1{chr(c)} {chr(c)}'{chr(c)}A" for c in cps[i:i + 256]).encode()
            if eng.tokenize(data, add_bos=False) != ref.tokenize(data, False, False):
                bad = [hex(c) for c in cps[i:i + 256]
                       if (d := f"x{chr(c)}1{chr(c)} {chr(c)}'{chr(c)}A".encode())
                       and eng.tokenize(d, add_bos=False) != ref.tokenize(d, False, False)]
                pytest.fail(f"code points classified differently from llama.cpp: {bad[:20]}")


@pytest.mark.parametrize("pre", ["default", "qwen2", "llama-bpe", "gpt-2"])
def test_bpe_round_trip(bpe_dir, pre):
    with Engine(bpe_dir / f"{pre}.gguf", vocab_only=True) as eng:
        for text in CORPUS:
            data = text.encode()
            assert eng.detokenize(eng.tokenize(data, add_bos=False)) == data, text[:60]


def test_bpe_user_defined_token_always_matched(bpe_dir):
    with Engine(bpe_dir / "gpt-2.gguf", vocab_only=True) as eng:
        tag = eng.tokenize("<user_tag>", add_bos=False)
        assert len(tag) == 1
        assert eng.tokenize("a<user_tag>b<|im_start|>", add_bos=False)[1] == tag[0]
        assert len(eng.tokenize("<|im_start|>", add_bos=False, special=False)) > 1
        assert len(eng.tokenize("<|im_start|>", add_bos=False, special=True)) == 1


# ---- Gemma 4's SentencePiece-style BPE ------------------------------------------------

GEMMA4_TEXTS = [
    b"\n" * k + b"x" for k in (1, 2, 3, 7, GEMMA4_NEWLINE_RUNS, GEMMA4_NEWLINE_RUNS + 1, 40)
] + [b"a\n\n\n\nb", b"\n", b"\r\n\r\n", b"  \n  ", b"x \n\n y", b"<|turn>user\nhi<turn|>\n<|turn>model\n",
     b"<|channel>thought\n<channel|>", b'<|tool_call>call:f{a:<|"|>x<|"|>}<tool_call|>', b"<bos><eos><pad><mask>",
     b"e e e. , ,  ", b"\t\t\t\tx", "▁ literal ▁▁ marks".encode()]


def _gemma4_file(d: Path, name: str, *, model: str = "gemma4", pre: str | None = None, extra: dict | None = None,
                 merges: bool = True) -> Path:
    text = long_text(2000).decode() + "\n" + "\n".join(CORPUS[:40])
    tokens, types, scores, mlist = gemma4_vocab(text, 400)
    ids = {t: i for i, t in enumerate(tokens)}
    kv = {"tokenizer.ggml.bos_token_id": ("uint32", ids["<bos>"]),
          "tokenizer.ggml.eos_token_id": ("uint32", ids["<eos>"]),
          "tokenizer.ggml.unknown_token_id": ("uint32", ids["<unk>"]),
          "tokenizer.ggml.padding_token_id": ("uint32", ids["<pad>"]),
          "tokenizer.ggml.add_space_prefix": ("bool", False),
          "tokenizer.ggml.add_bos_token": ("bool", True)}
    kv.update(extra or {})
    kv = {k: v for k, v in kv.items() if v is not None}
    return write_vocab_gguf(d / name, model=model, tokens=tokens, types=types, scores=scores,
                            merges=mlist if merges else None, pre=pre, extra=kv, arch="gemma4")


@pytest.fixture(scope="module")
def gemma4_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("gemma4")
    _gemma4_file(d, "gemma4.gguf")
    # the converter writes no pre-tokenizer; a file that names one keeps gemma4's
    _gemma4_file(d, "gemma4-pre.gguf", pre="qwen2")
    # llama.cpp adds BOS for Gemma 4 whatever add_bos_token says
    _gemma4_file(d, "gemma4-nobos.gguf", extra={"tokenizer.ggml.add_bos_token": ("bool", False)})
    # the same rules reached through a gpt2 model and a pre-tokenizer name
    _gemma4_file(d, "granite.gguf", model="gpt2", pre="granite-embed-multi-311m")
    _gemma4_file(d, "sarvam.gguf", model="gpt2", pre="sarvam-moe")
    return d


@pytest.mark.parametrize("name", ["gemma4", "gemma4-pre", "gemma4-nobos", "granite", "sarvam"])
def test_gemma4_tokenizer_matches_llama_cpp(gemma4_dir, name, fuzz_texts):
    path = gemma4_dir / f"{name}.gguf"
    ref = Reference(path)
    with Engine(path, vocab_only=True) as eng:
        texts = corpus_bytes() + random_texts(N_RANDOM, seed=43) + fuzz_texts + _case_mixes(N_RANDOM, 43) + GEMMA4_TEXTS
        cases, bad, examples = compare_tokenize(eng, ref, [t for t in texts if llama_safe(t)])
        print(f"{name}: {cases} tokenizations, {bad} mismatches")
        assert bad == 0, examples
        assert eng.n_vocab == ref.n_vocab
        assert (eng.bos, eng.eos) == (llama_cpp.llama_vocab_bos(ref.vocab), llama_cpp.llama_vocab_eos(ref.vocab))
        for t in range(eng.n_vocab):
            for s in (False, True):
                assert eng.token_bytes(t, special=s) == ref.piece(t, s), (t, s)
            assert eng.is_eog(t) == ref.is_eog(t), t


def test_gemma4_tokenizer_rules(gemma4_dir):
    """What the comparison above rests on, said plainly: spaces are U+2581 pieces, a
    character without a token is its <0xXX> bytes, a run of line feeds that is a token
    stays whole, BOS is added even where the file says not to, the text comes back."""
    with Engine(gemma4_dir / "gemma4-nobos.gguf", vocab_only=True) as eng:
        bos = GEMMA4_CONTROL.index("<bos>")
        assert eng.tokenize(b"hi")[0] == bos
        assert eng.tokenize(b"hi", add_bos=False)[0] != bos
        pieces = [eng.token_bytes(t) for t in eng.tokenize(" the dog", add_bos=False)]
        assert b"".join(pieces) == b" the dog" and pieces[0].startswith(b" ")
        emoji = eng.tokenize("\U0001f9ed".encode(), add_bos=False)  # no token: four bytes
        assert [eng.token_bytes(t) for t in emoji] == [bytes([b]) for b in "\U0001f9ed".encode()]
        three = eng.tokenize(b"\n\n\n", add_bos=False)
        assert len(three) == 1 and eng.token_bytes(three[0]) == b"\n\n\n"
        for text in CORPUS + [t.decode() for t in random_texts(100, seed=3)]:
            assert eng.detokenize(eng.tokenize(text.encode(), add_bos=False)) == text.encode(), text[:60]


def test_gemma4_without_merges_is_refused(tmp_path):
    path = _gemma4_file(tmp_path, "nomerges.gguf", merges=False)
    with pytest.raises(EngineError) as err:
        Engine(path, vocab_only=True)
    assert err.value.code == "missing" and "merges" in str(err.value)
    with pytest.raises(ValueError):
        Reference(path)


# ---- odd but loadable vocabularies ------------------------------------------------

def _odd_vocabularies(d: Path) -> list[Path]:
    """Vocabularies llama.cpp accepts although they are strange: empty and NUL-
    containing texts, malformed byte tokens, unknown types, NaN/inf scores,
    overlapping user-defined tokens, tokens it retypes by their spelling."""
    from .tokenizer_fixtures import bytes_to_unicode

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    for t, ty, sc in [("\u2581a", 1, -1.0), ("\u2581b", 1, -2.0), ("ab", 4, 0.0), ("ba", 4, 0.0), ("", 1, -3.0),
                      ("x\x00y", 1, -1.5), ("<0xZZ>", 6, 0.0), ("<0x4", 6, 0.0), ("weird", 99, -0.5),
                      ("undef", 0, -0.5), ("nan", 1, float("nan")), ("\u2581\u2581", 1, float("inf")),
                      ("aa", 1, -0.1), ("aaa", 1, -0.1), ("<end_of_turn>", 1, 0.0), ("unused_ctl", 3, 0.0),
                      ("\u2581a\u2581b", 1, -0.2), ("<|channel|>", 3, 0.0), ("<|im_end|>", 1, 0.0), ("bab", 5, -0.3)]:
        tokens.append(t)
        types.append(ty)
        scores.append(sc)
    out = [
        write_vocab_gguf(d / "odd-spm.gguf", model="llama", tokens=tokens, types=types, scores=scores,
                         extra={"tokenizer.ggml.add_space_prefix": ("bool", True)}),
        write_vocab_gguf(d / "odd-spm-eos.gguf", model="llama", tokens=tokens, types=types, scores=scores,
                         extra={"tokenizer.ggml.add_bos_token": ("bool", False),
                                "tokenizer.ggml.add_eos_token": ("bool", True)}),
    ]
    b2u = bytes_to_unicode()
    btoks = [b2u[b] for b in range(256)] + ["ab", "abc", "\u0120a", "xyz", "<|im_end|>", "</s>", "<|tool_response>", "a b"]
    btypes = [1] * 256 + [1, 1, 1, 1, 3, 1, 3, 1]
    merges = ["a b", "ab c", "\u0120 a", "x y", "xy z", "q r", "a  b", "ab  c", "\u0120 \u0120"]
    out.append(write_vocab_gguf(d / "odd-bpe.gguf", model="gpt2", tokens=btoks, types=btypes, merges=merges,
                                pre="llama-bpe", extra={"tokenizer.ggml.bos_token_id": ("uint32", 256),
                                                        "tokenizer.ggml.eos_token_id": ("uint32", 260)}))
    # whitespace-stripping special tokens, which llama.cpp assigns by model name
    for t, ty in [("<|user|>", 3), ("<|assistant|>", 3), ("<|end|>", 3), ("<|endoftext|>", 3),
                  ("<|placeholder1|>", 4), ("\u2581Hello", 1), ("\u2581hi", 1), ("<mask>", 3), ("[MASK]", 3)]:
        tokens.append(t)
        types.append(ty)
        scores.append(-1.0)
    for name in ("Phi-3 Mini Test", "Modern-BERT Test"):
        out.append(write_vocab_gguf(d / f"{name[:5]}.gguf", model="llama", tokens=tokens, types=types, scores=scores,
                                    extra={"general.name": ("string", name)}))
    out.append(write_vocab_gguf(d / "jina.gguf", model="gpt2", tokens=btoks[:256] + ["<mask>", "<s>"],
                                types=[1] * 256 + [3, 3], merges=["a b"], pre="jina-v2-es",
                                extra={"tokenizer.ggml.bos_token_id": ("uint32", 257),
                                       "tokenizer.ggml.eos_token_id": ("uint32", 257)}))
    return out


STRIP_TEXTS = [b"<|user|>\n  Hello<|end|>\n<|assistant|> hi </s> x <s> y <unk> z <|endoftext|>  w <|placeholder1|>\t\tq",
               b"a <mask> b  <mask>\n[MASK] c", b" \n<|user|> \n ", b"<|end|>"]


def test_odd_vocabularies_match_llama_cpp(tmp_path):
    texts = corpus_bytes() + random_texts(100, seed=5) + [b"x\x00y ab ba bab aaa nan weird <0x4"] + STRIP_TEXTS
    for path in _odd_vocabularies(tmp_path):
        ref = Reference(path)
        with Engine(path, vocab_only=True) as eng:
            cases, bad, examples = compare_tokenize(eng, ref, texts)
            assert bad == 0, (path.name, examples)
            for t in range(eng.n_vocab):
                for s in (False, True):
                    assert eng.token_bytes(t, special=s) == ref.piece(t, s), (path.name, t, s)
                assert eng.is_eog(t) == ref.is_eog(t), (path.name, t)
            assert (eng.bos, eng.eos) == (llama_cpp.llama_vocab_bos(ref.vocab), llama_cpp.llama_vocab_eos(ref.vocab))
            if path.name.startswith("Phi-3"):  # the whitespace after <|user|> is swallowed
                assert (eng.tokenize("<|user|>\n hi", add_bos=False, special=True)
                        == eng.tokenize("<|user|>hi", add_bos=False, special=True))


# ---- bad vocabularies ------------------------------------------------------------

def _spm_tokens(n=300):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += ["\u2581a", "\u2581b", "ab"][: max(0, n - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259)
    return tokens, types, [0.0] * len(tokens)


@pytest.mark.parametrize("case,code,needle", [
    ("scores_short", "corrupt", "scores"),
    ("types_long", "corrupt", "token_type"),
    ("bos_out_of_range", "corrupt", "bos_token_id"),
    ("eos_out_of_range", "corrupt", "eos_token_id"),
    ("duplicate", "corrupt", "duplicate token"),
    ("scores_wrong_type", "corrupt", "scores"),
    ("no_tokens", "missing", "tokenizer.ggml.tokens"),
    ("unknown_model", "unsupported", "tokenizer model"),
    ("bpe_no_merges", "missing", "merges"),
    ("bpe_bad_merge", "corrupt", "merge"),
    ("bpe_unknown_pre", "unsupported", "pre-tokenizer"),
    ("add_bos_without_bos", "corrupt", "add_bos_token"),
])
def test_bad_vocabulary_is_a_named_error(tmp_path, case, code, needle):
    tokens, types, scores = _spm_tokens()
    kw = dict(model="llama", tokens=tokens, types=types, scores=scores, extra={})
    if case == "scores_short":
        kw["scores"] = scores[:-1]
    elif case == "types_long":
        kw["types"] = types + [1]
    elif case == "bos_out_of_range":
        kw["extra"] = {"tokenizer.ggml.bos_token_id": ("uint32", len(tokens))}
    elif case == "eos_out_of_range":
        kw["extra"] = {"tokenizer.ggml.eos_token_id": ("uint32", 10_000_000)}
    elif case == "duplicate":
        kw["tokens"] = tokens[:-1] + [tokens[-2]]
    elif case == "scores_wrong_type":
        kw["scores"] = None
        kw["extra"] = {"tokenizer.ggml.scores": ("array", ["x"] * len(tokens))}
    elif case == "no_tokens":
        kw["tokens"] = []
        kw["types"] = kw["scores"] = None
    elif case == "unknown_model":
        kw["model"] = "rwkv"
    elif case in ("bpe_no_merges", "bpe_bad_merge", "bpe_unknown_pre"):
        kw = dict(model="gpt2", tokens=["a", "b", "ab"], types=[1, 1, 1], pre="gpt-2",
                  merges=None if case == "bpe_no_merges" else ["a b"],
                  extra={"tokenizer.ggml.bos_token_id": ("uint32", 0), "tokenizer.ggml.eos_token_id": ("uint32", 0)})
        if case == "bpe_bad_merge":
            kw["merges"] = ["a b", "ab"]
        if case == "bpe_unknown_pre":
            kw["pre"] = "no-such-pre"
    elif case == "add_bos_without_bos":
        kw = dict(model="gpt2", tokens=["a", "b", "ab"], types=[1, 1, 1], pre="gpt-2", merges=["a b"],
                  extra={"tokenizer.ggml.add_bos_token": ("bool", True)})
    path = write_vocab_gguf(tmp_path / f"{case}.gguf", **kw)
    with pytest.raises(EngineError) as err:
        Engine(path, vocab_only=True)
    assert err.value.code == code, err.value
    assert needle in str(err.value)


def test_small_spm_vocabulary_loads(tmp_path):
    tokens, types, scores = _spm_tokens()
    path = write_vocab_gguf(tmp_path / "ok.gguf", model="llama", tokens=tokens, types=types, scores=scores)
    with Engine(path, vocab_only=True) as eng:
        assert eng.n_vocab == len(tokens) and eng.bos == 1 and eng.eos == 2
        toks = eng.tokenize("a b", add_bos=True)
        assert toks[0] == 1 and eng.detokenize(toks[1:]) == b" a b"  # add_space_prefix by default


# ---- the C API's rules -------------------------------------------------------------

def test_buffer_rules_and_bad_arguments(gemma):
    from colibri._engine import ffi, lib

    e = gemma._e
    text = b"Hello world, this is a test."
    n = lib.colibri_tokenize(e, text, len(text), 0, 0, ffi.NULL, 0)
    assert n > 3
    out = ffi.new("int32_t[]", n + 1)
    out[2] = -7
    assert lib.colibri_tokenize(e, text, len(text), 0, 0, out, 2) == n  # full count, 2 written
    assert out[2] == -7
    assert lib.colibri_tokenize(e, text, len(text), 0, 0, out, n) == n
    assert list(out[0:n]) == gemma.tokenize(text, add_bos=False)
    assert lib.colibri_tokenize(e, ffi.NULL, 5, 0, 0, out, n) < 0
    assert lib.colibri_tokenize(e, text, len(text), 2, 0, out, n) < 0
    assert lib.colibri_tokenize(e, text, len(text), 0, 0, ffi.NULL, 4) < 0
    assert lib.colibri_tokenize(ffi.NULL, text, len(text), 0, 0, out, n) < 0

    buf = ffi.new("char[]", 4)
    assert lib.colibri_token_bytes(e, 105, 1, buf, 4) == len(b"<start_of_turn>")
    assert ffi.buffer(buf, 4)[:] == b"<sta"
    assert lib.colibri_token_bytes(e, 105, 0, buf, 4) == 0
    assert lib.colibri_token_bytes(e, -1, 0, buf, 4) < 0
    assert lib.colibri_token_bytes(e, gemma.n_vocab, 0, buf, 4) < 0
    assert lib.colibri_token_type(e, 105) == 3 and lib.colibri_token_type(e, 1000) == 1
    assert lib.colibri_token_type(e, 255) == 6 and lib.colibri_token_type(e, 107) == 4
    assert lib.colibri_token_type(e, -5) < 0
    assert lib.colibri_token_eot(e) == 106
    with pytest.raises(EngineError) as err:
        gemma.token_bytes(gemma.n_vocab)
    assert err.value.code == "invalid_argument"


def test_coli_tokenize_command(default_model):
    r = run_coli("tokenize", "--model", str(default_model), "--text", "Hi <start_of_turn>user", "--json", "--special")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tokens"][0] == 2 and 105 in out["tokens"]
    assert out["pieces"][0] == "<bos>" and "<start_of_turn>" in out["pieces"]
    r = run_coli("tokenize", "--model", str(default_model), "--text", "Hi <start_of_turn>", "--no-bos")
    assert r.returncode == 0, r.stderr
    assert "<start_of_turn>" not in r.stdout and "'Hi'" in r.stdout


def test_threads_tokenize_concurrently(gemma):
    texts = [t.encode() for t in CORPUS[5:25]]
    want = [gemma.tokenize(t) for t in texts]
    errors = []

    def work():
        for _ in range(20):
            if [gemma.tokenize(t) for t in texts] != want:
                errors.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


# ---- speed ---------------------------------------------------------------------

def _best(fn, reps=3):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        r = fn()
        best = min(best, time.perf_counter() - t0)
    return best, r


def test_speed_10k_words(gemma, gemma_ref, gemma_path):
    text = long_text(10_000)
    t_ours, toks = _best(lambda: gemma.tokenize(text, add_bos=False))
    t_ref, ref = _best(lambda: gemma_ref.tokenize(text, False, False))
    assert toks == ref
    print(f"gemma 10k words: {len(toks)} tokens, colibri {t_ours * 1e3:.1f} ms "
          f"({len(toks) / t_ours / 1e6:.2f} M tok/s), llama.cpp {t_ref * 1e3:.1f} ms")
    assert t_ours < 0.25  # milliseconds in practice; generous for slow CI machines
    t_load, _ = _best(lambda: Engine(gemma_path, vocab_only=True).close(), reps=1)
    print(f"gemma vocab load: {t_load * 1e3:.1f} ms")
    assert t_load < 2.0


# ---- sanitizers ---------------------------------------------------------------------

def _random_vocabularies(d: Path, n: int, seed: int = 3) -> list[Path]:
    """Vocabularies with hostile contents (SPM, byte-level BPE, Gemma 4's BPE): empty, NUL and
    invalid-UTF-8 texts, duplicates, any token type, NaN scores, bad merges, ids past the end."""
    rng = random.Random(seed)
    alphabet = [b"a", b"b", b" ", b"\xe2\x96\x81", b"<", b">", b"\x00", b"\xff", b"\xc3", b"<0x41>", b"\xc4\xa0", b"'s"]
    pres = ["default", "qwen2", "llama-bpe", "olmo", "gpt-2", "starcoder", "sarvam-moe", "no-such-pre", ""]
    out = []
    for i in range(n):
        model = rng.choice(["llama", "gpt2", "gemma4"])
        nt = rng.randint(1, 80)
        tokens = [b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(nt)]
        if model != "gpt2" and rng.random() < 0.7:
            tokens += [f"<0x{b:02X}>".encode() for b in range(256)]
        if rng.random() < 0.9:  # most unique (as llama.cpp needs: the text before a NUL counts), a few not
            seen, uniq = set(), []
            for t in tokens:
                key = t.split(b"\x00")[0] or b"[EMPTY]"
                if key not in seen:
                    seen.add(key)
                    uniq.append(t)
            tokens = uniq
        kw = dict(model=model, tokens=tokens, extra={})
        if rng.random() < 0.8:
            kw["types"] = [rng.randint(-1, 8) for _ in tokens]
        if rng.random() < 0.8:
            kw["scores"] = [rng.choice([0.0, -1.5, float("nan"), float("inf"), rng.uniform(-10, 0)]) for _ in tokens]
        if model != "llama":
            kw["pre"] = rng.choice(pres)
            parts = [t for t in tokens if t and b" " not in t and b"\x00" not in t] or [b"a"]
            kw["merges"] = [rng.choice(parts) + b" " + rng.choice(parts) for _ in range(rng.randint(0, 40))]
            if rng.random() < 0.1:
                kw["merges"].append(b"nospace")
        for key in ("bos", "eos", "eot", "unknown", "padding"):
            if rng.random() < 0.5:
                kw["extra"][f"tokenizer.ggml.{key}_token_id"] = ("uint32", rng.randint(0, len(tokens) + 2))
        for key in ("add_bos_token", "add_eos_token", "add_space_prefix"):
            if rng.random() < 0.5:
                kw["extra"][f"tokenizer.ggml.{key}"] = ("bool", rng.random() < 0.5)
        out.append(write_vocab_gguf(d / f"random{i}.gguf", **kw))
    return out


def test_tokenizer_under_sanitizers(asan_gguf_check, tmp_path, bpe_dir, gemma4_dir, default_model):
    """tests/engine/test_tokenizer_fuzz.c against the AddressSanitizer + UBSan
    build of the engine, on every vocabulary above and on hostile ones."""
    lib = asan_gguf_check.parent / "libcolibri.a"
    exe = tmp_path / "test_tokenizer_fuzz"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-O1", "-g", "-fno-omit-frame-pointer",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                    f"-I{ROOT / 'engine' / 'include'}", "-o", str(exe),
                    str(Path(__file__).with_name("test_tokenizer_fuzz.c")), str(lib), "-lm", "-pthread"], check=True)
    files = [default_model] + sorted(bpe_dir.glob("*.gguf")) + sorted(gemma4_dir.glob("*.gguf"))
    files += _odd_vocabularies(tmp_path)
    files += _random_vocabularies(tmp_path, 60)
    r = subprocess.run([str(exe), "300", *map(str, files)], capture_output=True, text=True, errors="replace",
                       timeout=300)
    report = r.stdout + r.stderr
    assert r.returncode == 0, report[-4000:]
    assert "runtime error" not in report and "AddressSanitizer" not in report, report[-4000:]
    assert report.count(": ok (") >= len(files) // 2, report
