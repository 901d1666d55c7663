"""The vendor-schema extract the reply tests use is the vendors' own text (where the source is at hand)."""
from __future__ import annotations

import pytest

from tests.fixtures.vendor import extract


def test_extract_matches_the_vendor_files():
    if not (extract.SOURCE / "openai-openapi.yaml").exists():
        pytest.skip(f"the vendor schemas are not at {extract.SOURCE} in this checkout")
    pytest.importorskip("yaml")
    assert extract.extract() == extract.load()


def test_extract_has_what_the_reply_tests_read():
    schemas = extract.load()
    assert set(schemas["openai"]) == set(extract.OPENAI) and set(schemas["anthropic"]) == set(extract.ANTHROPIC)
    assert "choices" in schemas["openai"]["CreateChatCompletionResponse"]["required"]
    assert "content" in schemas["anthropic"]["Message"]["required"]
    assert {"Response", "ResponseStreamEvent", "ResponseTextDeltaEvent", "OutputItem"} <= set(schemas["openai_responses"])
    assert {"Message", "ResponseTextBlock", "MessageDeltaUsage", "ModelInfo"} <= set(schemas["anthropic_replies"])
