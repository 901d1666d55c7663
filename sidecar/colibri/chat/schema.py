"""The JSON Schema keywords tool declarations use, checked against a model's tool-call
arguments (strict_tool_calls). A subset on purpose: types, enum/const, objects
(properties, required, additionalProperties), arrays (items, lengths), numbers'
bounds, string lengths, anyOf/oneOf/allOf. Unknown keywords constrain nothing.
"""
from __future__ import annotations

from typing import Any

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def problems(value: Any, schema: Any, where: str = "arguments") -> list[str]:
    """What is wrong with value under schema ([] when it conforms)."""
    if schema is True or schema is None or schema == {}:
        return []
    if schema is False:
        return [f"{where}: no value is allowed here"]
    if not isinstance(schema, dict):
        return []
    out: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(TYPES.get(k, lambda v: True)(value) for k in kinds):
            return [f"{where}: expected {' or '.join(map(str, kinds))}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{where}: must be {schema['const']!r}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                out.append(f"{where}: missing required {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, v in value.items():
            if name in props:
                out += problems(v, props[name], f"{where}.{name}")
            elif extra is False:
                out.append(f"{where}: unknown property {name!r}")
            elif isinstance(extra, dict):
                out += problems(v, extra, f"{where}.{name}")
    if isinstance(value, list):
        if "items" in schema:
            for i, v in enumerate(value):
                out += problems(v, schema["items"], f"{where}[{i}]")
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            out.append(f"{where}: {len(value)} items is outside the allowed count")
    if isinstance(value, str) and not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        out.append(f"{where}: length {len(value)} is outside the allowed range")
    if TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"] or "maximum" in schema and value > schema["maximum"]:
            out.append(f"{where}: {value} is out of range")
    for key, need in (("allOf", "all"), ("anyOf", "any"), ("oneOf", "one")):
        subs = schema.get(key)
        if not isinstance(subs, list):
            continue
        ok = [not problems(value, s, where) for s in subs]
        if need == "all" and not all(ok) or need == "any" and not any(ok) or need == "one" and sum(ok) != 1:
            out.append(f"{where}: does not match {key}")
    return out
