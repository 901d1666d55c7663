"""Reading one field of a JSON body with its type and range checked, or a named 400 that
quotes the field and the value.

JSON gives Python bools where numbers are expected (True is an int in
Python): every numeric reader refuses bools explicitly.
"""
from __future__ import annotations

import math
from typing import Any

from colibri.api.errors import ApiError, bad_request

MISSING = object()


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def wrong_type(param: str, expected: str, value: Any) -> ApiError:
    return bad_request("invalid_value", f"'{param}' must be {expected}, got {type_name(value)}", param)


def out_of_range(param: str, rule: str, value: Any) -> ApiError:
    return bad_request("invalid_value", f"'{param}' must be {rule}, got {value!r}", param)


def opt_bool(body: dict, name: str, default: bool | None = None) -> bool | None:
    value = body.get(name)
    if value is None:  # absent and null alike: a client serialising its whole model sends nulls
        return default
    if not isinstance(value, bool):
        raise wrong_type(name, "a boolean", value)
    return value


def opt_int(body: dict, name: str, lo: int | None = None, hi: int | None = None, default: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(name, "an integer", value)
    if isinstance(value, float):
        if not value.is_integer():
            raise wrong_type(name, "an integer", value)
        value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rule = f"between {lo} and {hi}" if lo is not None and hi is not None else (f">= {lo}" if lo is not None else f"<= {hi}")
        raise out_of_range(name, rule, value)
    return value


def opt_number(body: dict, name: str, default: float | None = None) -> float | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise wrong_type(name, "a finite number", value)
    return float(value)


def opt_str(body: dict, name: str, default: str | None = None) -> str | None:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise wrong_type(name, "a string", value)
    return value


def opt_object(body: dict, name: str) -> dict | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise wrong_type(name, "an object", value)
    return value


def sampling(body: dict, temperature: float, top_p: float, max_temperature: float) -> tuple[float, float]:
    """temperature in [0, max_temperature] and top_p in (0, 1], the given defaults when absent."""
    t = opt_number(body, "temperature", temperature)
    if not 0.0 <= t <= max_temperature:
        raise out_of_range("temperature", f"between 0 and {max_temperature:g}", body.get("temperature"))
    p = opt_number(body, "top_p", top_p)
    if not 0.0 < p <= 1.0:
        raise out_of_range("top_p", "in (0, 1]", body.get("top_p"))
    # the engine samples in single precision, where a top_p below 1.4e-45 would be 0 (and
    # refused as out of range): at least the smallest positive float, the same choice
    # (the most likely token alone)
    return t, max(p, FLOAT32_TRUE_MIN)


FLOAT32_TRUE_MIN = 1.401298464324817e-45  # the smallest positive single-precision float
INT32_MAX = 2**31 - 1


def top_k_of(body: dict, lo: int | None = None) -> int:
    """`top_k`, 0 (off) when absent; negative values are refused with lo=0 (Anthropic's) or
    mean off (llama.cpp's extension on the OpenAI routes). A k past every vocabulary keeps
    every token, as off does: kept as INT32_MAX, which the engine's int holds."""
    k = opt_int(body, "top_k", lo=lo, default=0)
    return min(max(k, 0), INT32_MAX)
