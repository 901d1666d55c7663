"""qwen3next / qwen35moe (Qwen3-Next, Qwen3-Coder-Next, Qwen3.5/3.6 MoE): Gated DeltaNet linear-attention
layers between gated full-attention layers (src/models/qwen3next.cpp, qwen35moe.cpp, delta-net-base.cpp of
llama.cpp 0.3.36). Until the engine's forward pass matches llama.cpp's, the loader refuses these files by
name."""
from __future__ import annotations

import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from tests.fixtures import moe_models as mm

pytest.importorskip("gguf")


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
def test_refused_by_name_until_it_matches_llama_cpp(arch):
    with pytest.raises(EngineError) as err:
        Engine(mm.tiny(arch, "Q8_0"), n_ctx=64)
    assert err.value.code == "unsupported"
    assert f"architecture '{arch}'" in str(err.value) and "Gated DeltaNet" in str(err.value)
