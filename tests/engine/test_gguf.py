"""engine/src/gguf.c: the reader against the real default model, against files
written by the `gguf` package (every metadata type), and against hostile files."""
from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from colibri.engine import GGUFFile  # noqa: E402
from colibri.errors import EngineError  # noqa: E402

from .gguf_raw import ARR, BOOL, F32, F64, I8, I16, I32, I64, STR, U8, U16, U32, U64, RawGGUF, gstr, kv, tensor_info

# ---- the real default model ----------------------------------------------

GEMMA_PARAMS = 268_098_176


def test_default_model_summary(default_model):
    with GGUFFile(default_model) as g:
        info = g.describe()
    assert info["arch"] == "gemma3"
    assert info["n_tensors"] == 236
    assert info["n_params"] == GEMMA_PARAMS
    assert set(info["tensor_types"]) == {"F32", "Q8_0", "Q5_0", "Q4_K", "Q6_K"}
    assert sum(info["tensor_types"].values()) == 236
    assert info["n_layer"] == 18 and info["n_embd"] == 640
    assert info["n_head"] == 4 and info["n_head_kv"] == 1
    assert info["tokenizer_model"] == "llama"
    assert info["vocab_size"] == 262_144
    assert info["has_chat_template"] is False  # this GGUF carries no template: the gateway supplies Gemma's
    assert info["n_expert"] is None
    assert info["file_bytes"] == os.path.getsize(default_model)


def _reader_value(field):
    """A field's value through gguf-py's reader, in our JSON's shape."""
    v = field.contents()
    if isinstance(v, bytes):
        return v.decode()
    return v


def _same(ours, theirs, key):
    if isinstance(theirs, float) or isinstance(ours, float):
        if theirs is None or ours is None or (isinstance(theirs, float) and not math.isfinite(theirs)):
            assert ours is None, key
        else:
            assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-30), key
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), key
        for a, b in zip(ours, theirs):
            _same(a, b, key)
    else:
        assert ours == theirs, key


def test_default_model_metadata_matches_gguf_py(default_model):
    reader = gguf.GGUFReader(default_model)
    with GGUFFile(default_model) as g:
        ours = g.metadata()
        assert g.version == 3
        theirs = {
            name: _reader_value(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")
        }
        assert set(ours) == set(theirs)
        for key in theirs:
            _same(ours[key], theirs[key], key)
        tensors = list(g.tensors())
        assert len(tensors) == len(reader.tensors) == 236
        for t, rt in zip(tensors, reader.tensors):
            assert t.name == rt.name
            assert t.type == rt.tensor_type.name
            assert list(t.shape) == [int(x) for x in rt.shape]
            assert g.data_offset + t.offset == rt.data_offset
            assert t.nbytes == rt.n_bytes
        assert sum(t.n_elements for t in tensors) == GEMMA_PARAMS
        # the mapping holds the same bytes as the file
        first = tensors[0]
        with open(default_model, "rb") as f:
            f.seek(g.data_offset + first.offset)
            assert g.tensor_bytes(first.name) == f.read(first.nbytes)


def test_long_arrays_can_be_cut(default_model):
    with GGUFFile(default_model) as g:
        i = [g.kv(k)["key"] for k in range(len(g.metadata(max_array=0)))].index("tokenizer.ggml.tokens")
        entry = g.kv(i, max_array=5)
    assert entry["type"] == "array[string]"
    assert entry["n"] == 262_144 and entry["truncated"] is True
    assert len(entry["value"]) == 5


# ---- every metadata type, written by the gguf package ---------------------

VT = gguf.GGUFValueType

EVERY_TYPE = [
    ("t.u8", 250, VT.UINT8),
    ("t.i8", -100, VT.INT8),
    ("t.u16", 65000, VT.UINT16),
    ("t.i16", -32000, VT.INT16),
    ("t.u32", 4_000_000_000, VT.UINT32),
    ("t.i32", -2_000_000_000, VT.INT32),
    ("t.f32", 0.15625, VT.FLOAT32),
    ("t.bool_true", True, VT.BOOL),
    ("t.bool_false", False, VT.BOOL),
    ("t.str", "héllo ✓ 🐦\n\"quoted\" \\ \t", VT.STRING),
    ("t.str_empty", "", VT.STRING),
    ("t.u64", 18_000_000_000_000_000_000, VT.UINT64),
    ("t.i64", -9_000_000_000_000_000_000, VT.INT64),
    ("t.f64", 2.718281828459045, VT.FLOAT64),
]

EVERY_ARRAY = [
    ("a.u8", [0, 1, 255], VT.UINT8),
    ("a.i8", [-128, 0, 127], VT.INT8),
    ("a.u16", [0, 65535], VT.UINT16),
    ("a.i16", [-32768, 32767], VT.INT16),
    ("a.u32", [0, 4_294_967_295], VT.UINT32),
    ("a.i32", [-5, 5, 7], VT.INT32),
    ("a.f32", [0.5, -1.25, 3.0], VT.FLOAT32),
    ("a.bool", [True, False, True], VT.BOOL),
    ("a.str", ["a", "", "ünï", "<|im_start|>"], VT.STRING),
    ("a.u64", [1, 2**64 - 1], VT.UINT64),
    ("a.i64", [-(2**63), 2**63 - 1], VT.INT64),
    ("a.f64", [1e300, -1e-300], VT.FLOAT64),
]


def write_every_type(path, alignment=None):
    w = gguf.GGUFWriter(str(path), "testarch")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_name("every type")
    for key, v, t in EVERY_TYPE:
        w.add_key_value(key, v, t)
    for key, v, t in EVERY_ARRAY:
        w.add_key_value(key, v, VT.ARRAY, sub_type=t)
    w.add_key_value("n.arr_of_arr", [[1, 2, 3], [4], [5, 6]], VT.ARRAY)
    w.add_key_value("n.arr_of_arr_str", [["x", "yy"], ["zzz"]], VT.ARRAY)
    w.add_key_value("n.deep", [[[1.5, 2.5]], [[3.5]]], VT.ARRAY)
    rng = np.random.default_rng(0)
    tensors = {
        "t1d.f32": rng.standard_normal(17).astype(np.float32),
        "t2d.f16": rng.standard_normal((3, 64)).astype(np.float16),
        "t3d.f32": rng.standard_normal((2, 3, 5)).astype(np.float32),
        "t4d.f32": rng.standard_normal((2, 1, 3, 4)).astype(np.float32),
    }
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    q = gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("t2d.q8_0", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    tensors["t2d.q8_0"] = q
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


@pytest.mark.parametrize("alignment", [None, 64, 1])
def test_every_metadata_type(tmp_path, alignment):
    path = tmp_path / "every.gguf"
    tensors = write_every_type(path, alignment)
    with GGUFFile(path) as g:
        assert g.alignment == (alignment or 32)
        md = g.metadata()
        entries = {g.kv(i)["key"]: g.kv(i) for i in range(len(md))}
        for key, v, t in EVERY_TYPE:
            assert entries[key]["type"] == t.name.lower().replace("float", "float")
            if t in (VT.FLOAT32, VT.FLOAT64):
                assert md[key] == pytest.approx(v)
            else:
                assert md[key] == v, key
        for key, v, t in EVERY_ARRAY:
            assert entries[key]["type"] == f"array[{t.name.lower()}]"
            assert entries[key]["n"] == len(v)
            if t in (VT.FLOAT32, VT.FLOAT64):
                assert md[key] == pytest.approx(v)
            else:
                assert md[key] == v, key
        assert md["n.arr_of_arr"] == [[1, 2, 3], [4], [5, 6]]
        assert entries["n.arr_of_arr"]["type"] == "array[array]"
        assert md["n.arr_of_arr_str"] == [["x", "yy"], ["zzz"]]
        assert md["n.deep"] == [[[1.5, 2.5]], [[3.5]]]
        assert md["general.architecture"] == "testarch"
        assert g.get("missing.key", "absent") == "absent"

        infos = {t.name: t for t in g.tensors()}
        assert set(infos) == set(tensors)
        assert infos["t3d.f32"].shape == (5, 3, 2)  # ne[0] first: reversed numpy shape
        assert infos["t4d.f32"].shape == (4, 3, 1, 2)
        assert infos["t2d.q8_0"].type == "Q8_0" and infos["t2d.q8_0"].shape == (64, 4)
        for name, arr in tensors.items():
            assert g.tensor_bytes(name) == arr.tobytes(), name
            assert infos[name].offset % g.alignment == 0
        with pytest.raises(KeyError):
            g.tensor_bytes("nope")
        d = g.describe()
        assert d["arch"] == "testarch" and d["n_tensors"] == 5
        assert d["tensor_types"] == {"F32": 3, "F16": 1, "Q8_0": 1}
        assert d["n_params"] == 17 + 192 + 30 + 24 + 256


def test_non_finite_floats_are_null(tmp_path):
    raw = RawGGUF(kvs=[kv("f.nan", F32, float("nan")), kv("f.inf", F64, float("inf")),
                       kv("f.arr", ARR, (F32, [1.0, float("-inf")]))])
    path = tmp_path / "nan.gguf"
    path.write_bytes(raw.build())
    with GGUFFile(path) as g:
        md = g.metadata()
    assert md == {"f.nan": None, "f.inf": None, "f.arr": [1.0, None]}


def test_invalid_utf8_strings_are_replaced(tmp_path):
    raw = RawGGUF(kvs=[kv("s", STR, b"ok\xff\xc3")])
    path = tmp_path / "utf8.gguf"
    path.write_bytes(raw.build())
    with GGUFFile(path) as g:
        assert g.metadata() == {"s": "ok\ufffd\ufffd"}


def test_empty_array_and_empty_file_header(tmp_path):
    raw = RawGGUF(kvs=[kv("e", ARR, (U32, []))])
    path = tmp_path / "empty_arr.gguf"
    path.write_bytes(raw.build())
    with GGUFFile(path) as g:
        assert g.metadata() == {"e": []}
        assert g.n_tensors == 0


def test_version_2_is_read(tmp_path):
    raw = RawGGUF(version=2, kvs=[kv("k", U32, 7)])
    path = tmp_path / "v2.gguf"
    path.write_bytes(raw.build())
    with GGUFFile(path) as g:
        assert g.version == 2 and g.metadata() == {"k": 7}


# ---- hostile files: each a named error ------------------------------------

F32_T = 0
Q4_0_T = 2


def _one_tensor(**kw):
    return RawGGUF(tensors=[tensor_info("w", [4], F32_T, 0)], data=b"\0" * 16, **kw)


def _nested(depth):
    v = (U8, [1])
    for _ in range(depth - 1):
        v = (ARR, [v])
    return v


HOSTILE = {
    "bad_magic": (RawGGUF(magic=b"GGML").build(), "not_gguf", "invalid magic characters 'GGML'"),
    "too_short": (b"GG", "truncated", "too short"),
    "header_cut": (b"GGUF\x03\x00\x00\x00\x00", "truncated", "the tensor count"),
    "version_1": (RawGGUF(version=1).build(), "unsupported_version", "version 1"),
    "version_4": (RawGGUF(version=4).build(), "unsupported_version", "version 4"),
    "big_endian": (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "not_gguf", "big-endian"),
    "huge_kv_count": (RawGGUF(n_kv=2**62).build(), "truncated", "metadata entries"),
    "huge_tensor_count": (RawGGUF(n_tensors=2**40).build(), "truncated", "tensors"),
    "huge_string": (RawGGUF(kvs=[gstr("k") + struct.pack("<I", STR) + gstr(b"x", length=2**63)]).build(),
                    "truncated", "string of"),
    "huge_key": (RawGGUF(kvs=[gstr(b"k", length=2**60)]).build(), "truncated", "string of"),
    "huge_array": (RawGGUF(kvs=[gstr("k") + struct.pack("<IIQ", ARR, U32, 2**61)]).build(), "truncated", "elements"),
    "huge_string_array": (RawGGUF(kvs=[gstr("k") + struct.pack("<IIQ", ARR, STR, 2**40)]).build(),
                          "truncated", "elements"),
    "deep_nesting": (RawGGUF(kvs=[kv("k", ARR, _nested(12))]).build(), "corrupt", "deeper than"),
    "unknown_value_type": (RawGGUF(kvs=[gstr("k") + struct.pack("<I", 13) + b"\0" * 8]).build(),
                           "corrupt", "unknown value type 13"),
    "unknown_array_type": (RawGGUF(kvs=[gstr("k") + struct.pack("<IIQ", ARR, 99, 1)]).build(),
                           "corrupt", "unknown value type 99"),
    "empty_key": (RawGGUF(kvs=[kv("", U8, 1)]).build(), "corrupt", "empty key"),
    "duplicate_key": (RawGGUF(kvs=[kv("a", U8, 1), kv("a", U8, 2)]).build(), "corrupt", "appears twice"),
    "alignment_not_pow2": (RawGGUF(kvs=[kv("general.alignment", U32, 48)], alignment=48).build(),
                           "corrupt", "power of two"),
    "alignment_zero": (RawGGUF(kvs=[kv("general.alignment", U32, 0)]).build(), "corrupt", "power of two"),
    "alignment_wrong_type": (RawGGUF(kvs=[kv("general.alignment", U64, 32)]).build(), "corrupt", "expected uint32"),
    "unknown_tensor_type": (RawGGUF(tensors=[tensor_info("w", [4], 4, 0)], data=b"\0" * 32).build(),
                            "corrupt", "type id 4"),
    "tensor_type_past_table": (RawGGUF(tensors=[tensor_info("w", [4], 1000, 0)], data=b"\0" * 32).build(),
                               "corrupt", "type id 1000"),
    "too_many_dims": (RawGGUF(tensors=[tensor_info("w", [1, 1, 1, 1, 1], F32_T, 0)], data=b"\0" * 32).build(),
                      "corrupt", "5 dimensions"),
    "dim_overflow": (RawGGUF(tensors=[tensor_info("w", [2**40, 2**40], F32_T, 0)]).build(), "corrupt", "overflows"),
    "dim_negative": (RawGGUF(tensors=[tensor_info("w", [2**63], F32_T, 0)]).build(), "corrupt", "dimension 0"),
    "bytes_overflow": (RawGGUF(tensors=[tensor_info("w", [2**62], F32_T, 0)]).build(), "corrupt", "overflows"),
    "row_not_block_multiple": (RawGGUF(tensors=[tensor_info("w", [33], Q4_0_T, 0)], data=b"\0" * 64).build(),
                               "corrupt", "block size 32"),
    "misaligned_offset": (RawGGUF(tensors=[tensor_info("w", [4], F32_T, 3)], data=b"\0" * 64).build(),
                          "corrupt", "alignment"),
    "data_past_end": (RawGGUF(tensors=[tensor_info("w", [64], F32_T, 0)], data=b"\0" * 16).build(),
                      "truncated", "past the end"),
    "offset_past_end": (RawGGUF(tensors=[tensor_info("w", [4], F32_T, 2**63)], data=b"\0" * 16).build(),
                        "truncated", "past the end"),
    "duplicate_tensor": (RawGGUF(tensors=[tensor_info("w", [4], F32_T, 0), tensor_info("w", [4], F32_T, 32)],
                                 data=b"\0" * 64).build(), "corrupt", "'w' appears twice"),
    "empty_tensor_name": (RawGGUF(tensors=[tensor_info("", [4], F32_T, 0)], data=b"\0" * 16).build(),
                          "corrupt", "empty name"),
    "tensor_info_cut": (_one_tensor().build()[:-20], "truncated", ""),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_is_a_named_error(tmp_path, name):
    data, code, fragment = HOSTILE[name]
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(data)
    with pytest.raises(EngineError) as err:
        GGUFFile(path)
    assert err.value.code == code, str(err.value)
    assert fragment in str(err.value)


def test_not_a_file(tmp_path):
    with pytest.raises(EngineError) as err:
        GGUFFile(tmp_path / "missing.gguf")
    assert err.value.code == "io_error" and "No such file" in str(err.value)
    with pytest.raises(EngineError) as err:
        GGUFFile(tmp_path)
    assert err.value.code == "io_error" and "not a regular file" in str(err.value)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(EngineError) as err:  # must not block waiting for a writer
        GGUFFile(fifo)
    assert err.value.code == "io_error"
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(EngineError) as err:
        GGUFFile(empty)
    assert err.value.code == "truncated"


def test_valid_raw_file_opens(tmp_path):
    """The hostile table's base is valid: the errors come from the defects."""
    path = tmp_path / "ok.gguf"
    path.write_bytes(_one_tensor(kvs=[kv("a", I8, -1), kv("b", U16, 2), kv("c", I16, -3), kv("d", I32, -4),
                                      kv("e", I64, -5), kv("f", BOOL, True), kv("g", U8, 9),
                                      kv("h", U64, 10)]).build())
    with GGUFFile(path) as g:
        assert g.metadata() == {"a": -1, "b": 2, "c": -3, "d": -4, "e": -5, "f": True, "g": 9, "h": 10}
        assert [t.name for t in g.tensors()] == ["w"]
