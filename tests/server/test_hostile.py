"""Hostile input, generated: every tool's input schema and the spec loader, fed what hypothesis
can think of. Only clear errors come back: no internal error, no traceback, no call that runs
past its bound. Backends are doubles here, so a valid random spec cannot start real work."""

import asyncio
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from posttrain.core.errors import ConfigError, PosttrainError
from posttrain.runs.context import Context
from posttrain.server.app import build_server
from posttrain.spec.schema import RunSpec, load_spec
from tests.doubles import PaidBackendDouble
from tests.server.schema_strategy import from_schema

CALL_BOUND_S = 15.0  # check_dataset on a 100,000-row gym is the slowest honest call
# ...but for check_reward, which runs a spec's reward on its rows: `{"spec": {}}` is the demo's
# whole spec (every field has a default), whose reward loads the relevance model on its first
# call (21 s measured beside the suite's workers), an honest check and not a slow error
BOUND_S = {"check_reward": 60.0}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One in-memory server over doubles, shared by every generated call (it must survive)."""
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        mp.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "5")
        ctx = Context(backends={"local": PaidBackendDouble(), "modal": PaidBackendDouble()})
        server = build_server(ctx)

        async def schemas():
            async with Client(server, mode="legacy") as client:
                return {t.name: t.input_schema for t in (await client.list_tools()).tools}

        yield server, asyncio.run(schemas())


def call(server, tool, arguments):
    async def main():
        async with Client(server, mode="legacy") as client:
            return await client.call_tool(tool, arguments)

    t = time.perf_counter()
    result = asyncio.run(main())
    return result, time.perf_counter() - t


def assert_clear(tool, arguments, result, seconds):
    assert seconds < BOUND_S.get(tool, CALL_BOUND_S), (tool, arguments, seconds)
    if result.is_error:
        text = result.content[0].text
        assert "internal error" not in text, (tool, arguments, text)
        assert "Traceback" not in text, (tool, arguments, text)
        assert len(text) < 5000


TOOLS = [
    "plan",
    "check_dataset",
    "check_reward",
    "smoke_run",
    "launch",
    "list_runs",
    "get_run",
    "tail_logs",
    "sample_traces",
    "evaluate",
    "cancel_run",
    "export_run",
]


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
def test_arguments_that_fit_the_schema_get_an_answer_or_a_clear_error(served, tool):
    server, schemas = served

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(arguments=from_schema(schemas[tool]))
    def check(arguments):
        result, seconds = call(server, tool, arguments)
        assert_clear(tool, arguments, result, seconds)

    check()


@pytest.mark.parametrize("tool", TOOLS)
def test_arguments_of_any_shape_get_a_clear_error(served, tool):
    server, _ = served

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        arguments=st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "run_id",
                    "steps",
                    "n",
                    "order",
                    "tail",
                    "after",
                    "search",
                    "reward",
                    "data",
                    "params",
                    "limit",
                    "status",
                    "k",
                    "confirmation_token",
                    "x",
                ]
            ),
            json_values,
            max_size=4,
        )
    )
    def check(arguments):
        result, seconds = call(server, tool, arguments)
        assert_clear(tool, arguments, result, seconds)

    check()


@settings(max_examples=300, deadline=None)
@given(data=json_values)
def test_the_spec_loader_accepts_or_explains_anything(data):
    t = time.perf_counter()
    try:
        load_spec(data if isinstance(data, dict) else {"model": data})
    except ConfigError as exc:
        assert str(exc) and "Traceback" not in str(exc)
    assert time.perf_counter() - t < 2


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=from_schema(RunSpec.model_json_schema()))
def test_specs_shaped_like_the_schema_load_or_explain(data):
    try:
        spec = load_spec(data)
    except ConfigError as exc:
        assert "spec field" in str(exc) or "reward" in str(exc)
    else:
        assert load_spec(json.loads(spec.to_json())).spec_id == spec.spec_id  # round-trips


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300))
def test_spec_text_of_any_kind_is_a_clear_error(text):
    outcome = None
    try:
        load_spec(text if text.lstrip().startswith("{") else "{" + text)
    except PosttrainError as exc:  # anything else escaping fails the test
        outcome = str(exc)
    assert outcome is None or outcome.startswith(("spec", "a spec"))
