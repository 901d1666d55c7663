"""Schema-driven fuzzing of `coli serve` with schemathesis, from the vendors' OpenAPI schemas
of `/v1/models`, chat, completions and `/v1/messages` (tests/sidecar/api_fuzz.py says what
is checked): COLI_FUZZ_API_CASES cases in all (default 1,050, a third per operation with a
body; the model list a few), positive and negative data, tiny `max_tokens`, against the real
server on the default model. 0 5xx, 0 hangs, every 2xx valid against the vendor's response
schema, every 4xx a named error in the endpoint's envelope. The soak (bench/fuzz_soak.sh)
runs 5,000 and more."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.sidecar import api_fuzz  # noqa: E402
from tests.sidecar.serve_support import ServerProcess  # noqa: E402

CASES = int(os.environ.get("COLI_FUZZ_API_CASES", "1050"))
OPERATIONS = [("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
              ("POST", "/v1/messages")]
TALLY = api_fuzz.Tally()


@pytest.fixture(scope="module")
def server(default_model):
    with ServerProcess(api_fuzz.SERVER_ARGS + ["--model", str(api_fuzz.served_model())]) as srv:
        yield srv
        assert srv.proc.poll() is None, "the server died under fuzzing:\n" + srv.output()[-4000:]


@pytest.fixture(scope="module")
def schema():
    return api_fuzz.make_schema(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("method,path", OPERATIONS, ids=[p for _, p in OPERATIONS])
def test_vendor_schema_fuzzing(server, schema, method, path):
    operation = schema[path][method]
    examples = -(-CASES // 3) if method == "POST" else 25
    before = len(TALLY.problems)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True, print_blob=False)
    @given(case=operation.as_strategy())
    def one(case):
        api_fuzz.run_case(case, server.base, server.model_id, TALLY)

    one()
    print(f"\n{method} {path}: {TALLY.summary()}")
    found = TALLY.problems[before:]
    assert not found, (f"{len(found)} problems:\n" + "\n".join(found[:15]) + "\n\nthe server's log ends:\n"
                       + server.output()[-3000:])


@pytest.mark.slow
def test_fuzzing_reached_its_count(server):
    """The cases of the tests above, counted: at least 1,000 (CI's bound), and each operation
    with a body answered 2xx for at least one case in forty (the generated requests reach the
    model, not only the validators: many fields the vendors allow are refused by name here,
    serve-api.md's penalties, `n`, `best_of`, `suffix` ...)."""
    if not TALLY.cases:
        pytest.skip("counts the cases of test_vendor_schema_fuzzing, which did not run")
    summary = TALLY.summary()
    print("\nfuzz_api:", summary, TALLY.statuses())
    print("4xx codes:", {f"{p} {s} {c}": n for (p, s, c), n in TALLY.codes.most_common()})
    if os.environ.get("COLI_FUZZ_API_CASES") is None:
        assert TALLY.cases >= 1000, summary
    for _, path in OPERATIONS[1:]:
        ok = sum(n for (p, s), n in TALLY.by_status.items() if p == path and 200 <= s < 300)
        total = sum(n for (p, _), n in TALLY.by_status.items() if p == path)
        assert total and ok >= total // 40, (path, summary, TALLY.statuses())
