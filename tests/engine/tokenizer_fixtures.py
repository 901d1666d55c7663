"""Fixtures for test_tokenizer.py: a text corpus that exercises tokenizers, a
byte-level BPE trainer, and a writer of small GGUF vocabularies that llama.cpp
loads with vocab_only=True.

Pure Python on purpose: the reference (llama.cpp) and colibri read the same
files, so the files only need to be valid, not realistic.
"""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

# ---- corpus ---------------------------------------------------------------

_PROSE = (
    "The quick brown fox jumps over the lazy dog. It's a dog's life, isn't it? "
    "They'll say we've done what I'd call THE BEST we'd ever DONE'S. "
    "Mixture-of-experts models route each token to a few experts; the rest stay on disk.\n"
)

_CODE = '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

for (int i = 0; i < 10; ++i) { printf("%d\\n", a[i] ^ b[i]); }
x = {"key": [1, 2.5, -3e10, 0x1F], 'q': None}  # comment
\tif (a && b || !c) return ~x >> 2;
'''

CORPUS: list[str] = [
    "",
    " ",
    "  ",
    "a",
    "Hello world",
    " Hello world",
    "Hello  world",
    "Hello\tworld\n",
    _PROSE,
    _CODE,
    "\n", "\n\n", "\n\n\n\n\n", "\r\n", " \n \n", "\t\t\tx", " \t \t ",
    " " * 1000,
    "x" + " " * 1000 + "y",
    "\n" * 40 + "end",
    "\t" * 50,
    "a  b   c    d     e      f       g        h",
    "1 12 123 1234 12345 123456 1234567 12345678901234567890",
    "3.14159265358979323846 and 2,718,281,828 and -0.5e-10",
    "٣٤٥ ௧௨௩ 一二三 Ⅻ ½ ²³",
    "日本語のテキストとカタカナ、ひらがな。中文也可以：你好，世界！",
    "한국어 텍스트입니다. 조합형 자모: 한글",
    "مرحبا بالعالم! هذا نص عربي مع تشكيل: مُحَمَّد",
    "עברית: שלום עולם",
    "Ελληνικά: Γειά σου Κόσμε, ΑΒΓ αβγ",
    "Русский текст: Съешь же ещё этих мягких французских булок.",
    "हिन्दी: नमस्ते दुनिया — ਪੰਜਾਬੀ — தமிழ் — ไทย ภาษาไทย",
    "combining: e\u0301 a\u0308 n\u0303 Z\u0335\u0336 q\u0323\u0307 \u0300\u0301 start",
    "emoji: 😀😃😄 👍🏽 🇫🇷🇯🇵 ❤️ 👨‍👩‍👧‍👦 🧑🏿‍🚀 🏳️‍🌈",
    "zero width: a\u200bb\u200cc\u200dd\ufeffe \u2060 nbsp:\u00a0x ideographic:\u3000y thin:\u2009z",
    "unicode spaces: \u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u200a\u2028\u2029\u202f\u205f\u0085.",
    "controls: \x00\x01\x07\x08\x0b\x0c\x1b\x1c\x1d\x1e\x1f\x7f end",
    "math: ∀x∈ℝ, ∃y: x² + y² ≤ 1 ⇒ ∫₀¹ f(x)dx ≈ ∑ aₙ; α≠β; 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚",
    "symbols: ©®™ €£¥₹ §¶† ‰ ← → ↑ ↓ ♠♣♥♦ ✓✗ «quotes» „low“ ‘single’ — – … ¿¡",
    "punct runs: !!! ??? ... ,,, ;;; ::: --- ___ *** ### $$$ %%% ^^^ &&& ||| ~~~ ``` '' \"\"",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text<eos>",
    "<start_of_turn><end_of_turn><start_of_turn>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>",
    "<|endoftext|><|begin_of_text|><|eot_id|>",
    "<<start_of_turn>> <start_of_turn <start_of_turn>> <unused0> <unused99> [multimodal] <mask> <pad> <unk>",
    "<s></s><unk> <0x41> <0xFF>",
    "don't won't I'M YOU'RE WE'VE THEY'LL SHE'D it'S 'S 're 'Ll",
    "camelCaseWord snake_case_word kebab-case-word SCREAMING_SNAKE PascalCase",
    "https://example.com/path?query=1&b=2#frag email@example.org",
    "mixed: abc123def 123abc ABC-123 a1b2c3 x=1+2-3*4/5 [1,2] (a) {b}",
    "tabs\tand\tspaces  \t  mixed \t\n\t end",
    "trailing spaces   ",
    "   leading spaces",
    "line1\nline2\r\nline3\rline4\n\n",
    "\u00e9\u00e8\u00ea\u00eb \u00c9\u00c8 ßẞ ĳ ǅ ﬁ ﬀ Å Ω K",
    "Ŀ ŉ ǰ ΐ ﬃ İstanbul ıi",
    "astral: 𐍈 𝄞 🀄 𠀀 𪚥 𫝀 𬺰 𰀀",
    "privateuse: \ue000\uf8ff noncharacter: \ufdd0\ufffe",
    "replacement: \ufffd and bom \ufeff",
    "a" * 300,
    "ab" * 200,
    "0123456789" * 20,
    "😀" * 30,
    "日" * 50,
]


def corpus_bytes() -> list[bytes]:
    """The corpus as UTF-8 plus byte strings that are not valid UTF-8."""
    out = [s.encode("utf-8") for s in CORPUS]
    out += [
        b"\xff", b"\xfe\xff", b"\x80", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(x",
        b"\xf0\x9f\x98", b"\xf0\x9f\x98 end", b"\xed\xa0\x80 surrogate", b"\xc0\x80 overlong", b"\xe0\x80\x80",
        b"\xf8\x88\x80\x80\x80", b"valid \xe6\x97\xa5 invalid \xe6\x97 mixed \xa5\xa5",
        "héllo".encode("latin-1"), b"\x00\x00\x00", b"tail \xf0",
    ]
    return out


def random_texts(n: int, seed: int = 1234, max_len: int = 60) -> list[bytes]:
    """Random mixes of corpus fragments, ASCII noise and random code points."""
    rng = random.Random(seed)
    pool = "".join(CORPUS)
    alphabet = list(set(pool))
    specials = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
                "\n\n", "   ", "\t", "'s", "'LL", "123456"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.35:
                i = rng.randrange(len(pool))
                parts.append(pool[i:i + rng.randint(1, max_len)])
            elif r < 0.6:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
            elif r < 0.75:
                parts.append(rng.choice(specials))
            elif r < 0.9:
                parts.append("".join(chr(rng.randint(0x20, 0x7e)) for _ in range(rng.randint(1, 12))))
            else:
                cp = rng.choice([rng.randint(0x80, 0x7ff), rng.randint(0x800, 0xd7ff),
                                 rng.randint(0xe000, 0xfffd), rng.randint(0x10000, 0x10ffff)])
                parts.append(chr(cp))
        out.append("".join(parts).encode("utf-8"))
    return out


def long_text(n_words: int = 10_000, seed: int = 7) -> bytes:
    """A long, mostly English text of about n_words words (for speed checks)."""
    rng = random.Random(seed)
    words = (_PROSE + _CODE + " ".join(CORPUS[20:40])).split()
    lines = []
    for _ in range(n_words // 12):
        lines.append(" ".join(rng.choice(words) for _ in range(12)))
    return "\n".join(lines).encode("utf-8")


# ---- byte-level BPE --------------------------------------------------------

def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def learn_merges(words: Counter, n_merges: int) -> list[tuple[str, str]]:
    """BPE: n_merges times, merge the most frequent adjacent pair of symbols over the words (tuples
    of symbols, with their counts); ties go to the greatest pair."""
    merges: list[tuple[str, str]] = []
    vocab = dict(words)
    for _ in range(n_merges):
        pairs = Counter()
        for w, c in vocab.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        new = {}
        for w, c in vocab.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        vocab = new
    return merges


def train_bpe(text: str, n_merges: int) -> list[tuple[str, str]]:
    """Byte-level BPE merges learned on whitespace-separated words of `text`."""
    b2u = bytes_to_unicode()
    words = Counter()
    for w in text.replace("\n", " \n ").split(" "):
        if w:
            words[tuple(b2u[b] for b in (" " + w).encode("utf-8"))] += 1
    return learn_merges(words, n_merges)


def bpe_vocab(merges: list[tuple[str, str]], specials: list[str]) -> tuple[list[str], list[int]]:
    """Tokens (256 byte characters, merge results, then specials) and their types."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    types = [1] * len(tokens)
    for s in specials:  # a merge may have spelled a special already: retype it
        if s in seen:
            types[tokens.index(s)] = 3
        else:
            tokens.append(s)
            types.append(3)
    return tokens, types


def write_vocab_gguf(path: Path, *, model: str, tokens: list[str | bytes], types: list[int] | None = None,
                     scores: list[float] | None = None, merges: list[str] | None = None, pre: str | None = None,
                     extra: dict | None = None, arch: str = "llama") -> Path:
    """A GGUF with only metadata (no tensors): enough for vocab_only loading."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    if types is not None:
        w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    if merges is not None:
        w.add_token_merges(merges)
    for key, (kind, value) in (extra or {}).items():
        getattr(w, f"add_{kind}")(key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ---- SentencePiece-style BPE (Gemma 4's "gemma4" tokenizer) ------------------------

SPACE = "\u2581"
# Gemma 4's specials as its converter types them (conversion/gemma.py, Gemma4Model.set_vocab): control
# tokens, then the markers it makes user-defined so that the chat parser always sees them
GEMMA4_CONTROL = ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]", "<|turn>", "<turn|>", "<|tool>",
                  "<tool|>", "<|image>", "<image|>")
GEMMA4_VISIBLE = ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
                  '<|"|>')
GEMMA4_NEWLINE_RUNS = 31  # "\n" * 1..31 are tokens, as in Gemma's vocabulary


def train_spm_bpe(text: str, n_merges: int) -> list[tuple[str, str]]:
    """BPE merges over the characters (not bytes) of `text` with spaces as U+2581,
    learned on words that start at a space, as SentencePiece's BPE trainer does;
    lines apart, as Gemma 4's pre-tokenizer splits them."""
    words = Counter()
    for line in text.replace(" ", SPACE).split("\n"):
        for i, w in enumerate(line.split(SPACE)):
            w = (SPACE if i else "") + w
            if w:
                words[tuple(w)] += 1
    return learn_merges(words, n_merges)


def gemma4_vocab(text: str, n_merges: int) -> tuple[list[str], list[int], list[float], list[str]]:
    """(tokens, types, scores, merges) laid out as a Gemma 4 file's: specials, the 256
    <0xXX> byte tokens, the characters of `text` (others fall back to bytes), runs of
    line feeds, merge results; plus merges that cross a word's start and join line
    feeds (Gemma 4 merges a whole line, so they apply)."""
    text = text.replace("\x00", "")  # llama.cpp reads token texts as C strings
    merges = train_spm_bpe(text, n_merges)
    merges += [(SPACE, SPACE), (SPACE + SPACE, SPACE + SPACE), (".", SPACE), (",", SPACE), ("\n", "\n"),
               ("\n\n", "\n\n"), ("\t", "\t"), ("e", SPACE)]
    tokens = list(GEMMA4_CONTROL) + list(GEMMA4_VISIBLE) + [f"<0x{b:02X}>" for b in range(256)]
    types = [3] * len(GEMMA4_CONTROL) + [4] * len(GEMMA4_VISIBLE) + [6] * 256
    types[GEMMA4_CONTROL.index("<unk>")] = 2
    seen = set(tokens)
    chars = sorted(set(text.replace(" ", SPACE)) - {"\n"})
    for t in chars + ["\n" * k for k in range(1, GEMMA4_NEWLINE_RUNS + 1)] + [a + b for a, b in merges]:
        if t not in seen:
            seen.add(t)
            tokens.append(t)
            types.append(1)
    scores = [0.0 if ty != 1 else -float(i) for i, ty in enumerate(types)]
    return tokens, types, scores, [a + " " + b for a, b in merges]

