"""Reading a Responses API event stream in the tests: each event checked against the vendor's
schema of its type, and the order of a whole stream."""
from __future__ import annotations

import json

from tests.fixtures.vendor.validate import event_schema, problems

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def events(text: str) -> list[dict]:
    """The stream's events, each checked: `event:` names the data's type, and the data fits
    the vendor's schema of that event."""
    out = []
    for block in text.split("\n\n")[:-1]:
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), block[:200]
        event = json.loads(data[len("data: "):])
        assert event["type"] == name[len("event: "):]
        schema = event_schema(event["type"])
        assert schema is not None, f"{event['type']} is not an event of the Responses API"
        assert problems(schema, event) == [], event
        out.append(event)
    return out


def grammar(evs: list[dict]) -> dict:
    """Check the order of a whole stream; returns the terminal event's response."""
    assert [e["sequence_number"] for e in evs] == list(range(len(evs)))
    assert [e["type"] for e in evs[:2]] == ["response.created", "response.in_progress"]
    assert evs[-1]["type"] in TERMINAL and not any(e["type"] in TERMINAL for e in evs[:-1])
    rid = evs[0]["response"]["id"]
    assert rid.startswith("resp_") and all(e["response"]["id"] == rid for e in evs if "response" in e)
    assert evs[0]["response"]["status"] == "in_progress" and evs[0]["response"]["output"] == []
    added, done, texts = {}, [], {}
    for e in evs:
        kind = e["type"]
        if kind == "response.output_item.added":
            assert e["output_index"] == len(done) and e["output_index"] not in added  # one item open at a time
            added[e["output_index"]] = e["item"]
            assert e["item"]["status"] == "in_progress"
        elif kind == "response.output_item.done":
            assert e["item"]["id"] == added[e["output_index"]]["id"] and e["output_index"] == len(done)
            done.append(e["item"])
        elif "item_id" in e:
            assert e["output_index"] in added and e["output_index"] == len(done)  # inside the open item
            assert e["item_id"] == added[e["output_index"]]["id"]
            if kind.endswith(".delta"):
                texts[(kind, e["output_index"])] = texts.get((kind, e["output_index"]), "") + e["delta"]
            if kind == "response.output_text.done":
                assert texts.get(("response.output_text.delta", e["output_index"]), "") == e["text"]
            if kind == "response.reasoning_text.done":
                assert texts.get(("response.reasoning_text.delta", e["output_index"]), "") == e["text"]
            if kind == "response.function_call_arguments.done":
                assert texts[("response.function_call_arguments.delta", e["output_index"])] == e["arguments"]
    final = evs[-1]["response"]
    assert final["output"] == done  # the items the stream finished, in order
    return final
