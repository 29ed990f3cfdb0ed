"""Hostile input, second round (issue 15, findings 4, 5, 6, 8 and 10): every malformed field
gets a clear error naming it and the fix, a small input cannot take unbounded memory or CPU,
and the same server answers list_runs after each call, in both protocol eras."""

import asyncio
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from posttrain.core.errors import ConfigError
from posttrain.runs.layout import EventWriter, check_run_id, write_json_atomic
from posttrain.server.app import build_server
from posttrain.spec.bounds import MAX_DEPTH, template_columns
from posttrain.spec.schema import load_spec
from posttrain.tools.runs import MAX_TRACE_CHARS, MAX_TRACE_STEPS

MODES = ("legacy", "2026-07-28")
RUN = "run-260101-000000-cafe"
# a model's output or a log line that would write the clipboard, make a link, clear the
# screen, hide text, and (U+009B) start a control sequence on its own, plus rich markup
ESCAPES = (
    "clip \x1b]52;c;aGVsbG8=\x07 link \x1b]8;;http://evil.example\x07x\x1b]8;;\x07 "
    "clear \x1b[2J hide \x1b[8m csi \u009b2J bell \x07 cr \r [link=http://evil.example]m[/link]"
)
CALL_BOUND_S = 10.0
GROWTH_BOUND_MB = 300


def make_run(root: Path, run_id: str = RUN, steps: int = 3, samples: int = 2, text: int = 20):
    """A finished run with a trace file for each of `steps` steps."""
    folder = root / run_id
    write_json_atomic(
        folder / "run.json",
        {"run_id": run_id, "backend": "local", "created_at": time.time(), "spec_id": "abc"},
    )
    (folder / "spec.json").write_text(
        json.dumps({"model": {"name": "tiny-local"}, "algorithm": {"kind": "grpo", "steps": steps}})
    )
    (folder / "traces").mkdir()
    w = EventWriter(folder)
    w.write("stage", stage="training")
    w.write("log", level="info", message="model said: " + ESCAPES)
    for step in range(1, steps + 1):
        name = f"traces/step_{step:04d}.jsonl"
        rows = (
            json.dumps(
                {
                    "step": step,
                    "idx": i,
                    "prompt": "p" * text,
                    "completion": "c" * text + ESCAPES,
                    "reward": i / samples,
                    "components": {},
                }
            )
            + "\n"
            for i in range(samples)
        )
        (folder / name).write_text("".join(rows))
        w.write("trace", phase="train", step=step, path=name, n=samples)
    w.write("result", status="succeeded", final={})
    w.close()
    return folder


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    Path("data.jsonl").write_text(
        "".join(json.dumps({"prompt": f"a poem {i}", "reference": "r"}) + "\n" for i in range(6))
    )
    Path("aliases.yaml").write_text(  # 578 bytes that expand to gigabytes, under name:
        "a: &a ['lol','lol','lol','lol','lol','lol','lol','lol','lol']\n"
        + "".join(
            f"{b}: &{b} [{','.join('*' + a for _ in range(9))}]\n"
            for a, b in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "name: *i\n"
    )
    os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
    os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
    make_run(tmp_path / "home" / "runs")
    return tmp_path


def template(text: str) -> dict:
    return {
        "spec": {"model": "tiny-local", "dataset": {"path": "data.jsonl", "prompt_template": text}}
    }


def kwargs(**values) -> dict:
    return {"spec": {"model": {"name": "tiny-local", "chat_template_kwargs": values}}}


def nested(depth: int) -> dict:
    spec: dict = {"model": "tiny-local"}
    inner = spec
    for _ in range(depth):
        inner["x"] = {}
        inner = inner["x"]
    return {"spec": spec}


JINJA_BURN = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
CHECK_DATA = {"reward": "rhyme", "data": "data.jsonl"}
# (tool, arguments, what the error must say)
HOSTILE = [
    ("plan", {"spec": "aliases.yaml"}, "YAML aliases"),
    ("check_dataset", {"spec": "aliases.yaml"}, "YAML aliases"),
    ("plan", {"spec": {"name": "n" * 20_000_000}}, "spec field 'name'"),
    (
        "plan",
        {"spec": {"dataset": {"builtin": "rhyme-gym", "filters": [{"column": "a"}] * 300_000}}},
        "more than",
    ),
    ("plan", nested(200), "nested"),  # deeper does not leave the client; see the string below
    ("plan", {"spec": '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"}, "nested too deeply"),
    ("plan", {"spec": '{"algorithm": {"seed": ' + "9" * 5000 + "}}"}, "digits"),
    ("plan", {"spec": {"algorithm": {"seed": 2**40}}}, "algorithm.seed"),
    ("plan", {"spec": '{"budget_usd": Infinity}'}, "budget_usd"),
    ("check_dataset", template("{prompt:>200000000}"), "format spec"),
    ("check_dataset", template("{prompt:>10000000}"), "format spec"),
    ("check_dataset", template("{0}"), "positional"),
    ("check_dataset", template("{}"), "positional"),
    ("check_dataset", template("{prompt[99999999]}"), "attribute or index"),
    ("check_dataset", template("{prompt.nope}"), "attribute or index"),
    ("check_dataset", template("{prompt:{prompt}}"), "format spec"),
    ("check_dataset", template("{prompt!z}"), "conversion"),
    ("check_dataset", template("{prompt!r}"), "conversion"),
    ("check_dataset", template("{prompt"), "not a valid template"),
    ("check_dataset", kwargs(chat_template=JINJA_BURN), "chat_template_kwargs.chat_template"),
    ("check_dataset", kwargs(tools=1), "chat_template_kwargs.tools"),
    ("check_dataset", kwargs(tokenize=True), "chat_template_kwargs.tokenize"),
    ("plan", kwargs(enable_thinking={"a": [1]}), "chat_template_kwargs.enable_thinking"),
    (
        "check_reward",
        {"reward": "f.py:score", "params": {"value_range": [1]}, **CHECK_DATA},
        "value_range",
    ),
    (
        "check_reward",
        {"reward": "f.py:score", "params": {"value_range": 5}, **CHECK_DATA},
        "value_range",
    ),
    (
        "check_reward",
        {"reward": "f.py:score", "params": {"value_range": [2, 1]}, **CHECK_DATA},
        "value_range",
    ),
    ("check_reward", {"reward": "rhyme", "data": "loop-a"}, "symbolic link loop"),
    ("check_reward", {"reward": "rhyme", "data": "x" * 300 + ".jsonl"}, "too long"),
    ("check_reward", {"reward": "rhyme", "data": "~nosuchuser/x.jsonl"}, "names no user"),
    ("plan", {"spec": {"dataset": {"path": "loop-a"}}}, "symbolic link loop"),
    ("plan", {"spec": {"dataset": {"path": "~nosuchuser/x.jsonl"}}}, "names no user"),
    ("plan", {"spec": {"dataset": {"path": "x" * 300 + ".jsonl"}}}, "dataset.path"),
    ("plan", {"spec": {"model": "x" * 300}}, "model.name"),
    ("tail_logs", {"run_id": RUN, "search": "\x00"}, "search"),
    ("tail_logs", {"run_id": RUN, "after": 2**63}, "after"),
    ("tail_logs", {"run_id": RUN, "after": 2**70}, "after"),
    ("sample_traces", {"run_id": RUN, "steps": "²"}, "steps"),
    ("sample_traces", {"run_id": RUN, "steps": "1-²"}, "steps"),
    ("get_run", {"run_id": RUN + "\n"}, "not valid"),
    ("plan", {"spec": {"resume_from": RUN + "\n"}}, "resume_from"),
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("mode", MODES)
def test_every_hostile_field_gets_a_clear_error_in_bounded_time_and_memory(project, mode):
    Path("f.py").write_text(
        "def score(completions, **kw):\n    return [0.0 for _ in completions]\n"
    )

    async def main():
        async with Client(build_server(), mode=mode) as client:
            for tool, arguments, expected in HOSTILE:
                before, t = peak_rss_mb(), time.perf_counter()
                result = await client.call_tool(tool, arguments)
                seconds = time.perf_counter() - t
                shown = str(arguments)[:80]
                assert result.is_error, (tool, shown, result.structured_content)
                text = result.content[0].text
                assert expected in text, (tool, shown, text[:400])
                for bad in ("Traceback", "internal error", "storage problem"):
                    assert bad not in text, (tool, shown, text[:400])
                assert len(text) < 5000, (tool, shown, len(text))
                assert seconds < CALL_BOUND_S, (tool, shown, seconds)
                assert peak_rss_mb() - before < GROWTH_BOUND_MB, (tool, shown)
                assert not (await client.call_tool("list_runs", {})).is_error, (tool, shown)

    asyncio.run(main())


def test_prompt_templates_name_plain_columns_only():
    assert template_columns("Q: {question}\n{{literal}} A: {answer}") == ["question", "answer"]
    assert template_columns("no fields") == []
    for bad in ("{x:5}", "{x!s}", "{x.y}", "{x[0]}", "{0}", "{", "}", "{x:{y}}"):
        with pytest.raises(ValueError, match="prompt_template"):
            template_columns(bad)


def test_a_yaml_spec_with_aliases_is_refused_before_it_expands(project):
    t = time.perf_counter()
    with pytest.raises(ConfigError, match=r"spec line 2: YAML aliases \(\*a\)"):
        load_spec("aliases.yaml")
    assert time.perf_counter() - t < 2
    Path("plain.yaml").write_text("model: tiny-local\ndataset: {path: data.jsonl}\n")
    assert load_spec("plain.yaml").dataset.path == "data.jsonl"


def test_spec_bounds_name_the_field_and_the_limit():
    with pytest.raises(ConfigError, match=f"more than {MAX_DEPTH} levels"):
        load_spec(nested(MAX_DEPTH + 5)["spec"])
    with pytest.raises(ConfigError, match="budget_usd"):
        load_spec({"budget_usd": float("inf")})
    with pytest.raises(ConfigError, match="budget_usd"):
        load_spec({"budget_usd": float("nan")})
    with pytest.raises(
        ConfigError, match=r"dataset.system_prompt. is 200,000 characters; at most 100,000"
    ):
        load_spec({"dataset": {"builtin": "rhyme-gym", "system_prompt": "s" * 200_000}})
    assert load_spec({"algorithm": {"seed": 2**32 - 1}}).algorithm.seed == 2**32 - 1
    assert load_spec(kwargs(enable_thinking=False)["spec"]).model.template_kwargs() == {
        "enable_thinking": False
    }


def test_run_ids_with_a_trailing_newline_are_refused():
    with pytest.raises(ConfigError, match="not valid"):
        check_run_id(RUN + "\n")
    assert check_run_id(RUN) == RUN


def test_budget_caps_must_be_finite(monkeypatch, tmp_path):
    from posttrain.ledger.budget import BudgetPolicy

    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path))
    monkeypatch.setenv("POSTTRAIN_MAX_RUN_USD", "Infinity")
    with pytest.raises(ConfigError, match="max_run_usd"):
        BudgetPolicy.load()


# -- sample_traces: linear and capped --------------------------------------------------------


def test_sample_traces_over_a_huge_range_is_linear_and_pages_on(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    make_run(tmp_path / "home" / "runs", steps=3000, samples=1)

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            await client.call_tool("get_run", {"run_id": RUN})  # indexes the run
            t = time.perf_counter()
            first = await client.call_tool(
                "sample_traces", {"run_id": RUN, "steps": "1-999999999", "n": 64}
            )
            seconds = time.perf_counter() - t
            page = first.structured_content
            assert not first.is_error, first.content[0].text
            assert sorted(map(int, page["steps"])) == list(range(1, MAX_TRACE_STEPS + 1))
            assert (
                page["next_steps"] == f"{MAX_TRACE_STEPS + 1}-3000" and "3000 steps" in page["note"]
            )
            assert seconds < 3, seconds
            second = (
                await client.call_tool(
                    "sample_traces", {"run_id": RUN, "steps": page["next_steps"]}
                )
            ).structured_content
            assert min(map(int, second["steps"])) == MAX_TRACE_STEPS + 1
            picked = (
                await client.call_tool(
                    "sample_traces", {"run_id": RUN, "steps": "1-3,10,2990-2999"}
                )
            ).structured_content
            assert sorted(map(int, picked["steps"])) == [1, 2, 3, 10, *range(2990, 3000)]
            assert picked["next_steps"] is None and picked["note"] is None

    asyncio.run(main())


def test_sample_traces_text_per_answer_is_capped(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    make_run(tmp_path / "home" / "runs", steps=10, samples=64, text=4000)

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            await client.call_tool("get_run", {"run_id": RUN})
            result = await client.call_tool(
                "sample_traces", {"run_id": RUN, "steps": "1-999999999", "n": 64}
            )
            return result.structured_content

    page = asyncio.run(main())
    text = sum(
        len(r["prompt"]) + len(r["completion"]) for rows in page["steps"].values() for r in rows
    )
    assert 0 < text <= MAX_TRACE_CHARS
    assert page["next_steps"] and len(page["steps"]) < 10
    assert len(json.dumps(page)) < 2 * MAX_TRACE_CHARS


# -- the CLI prints run data without its control characters ---------------------------------


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "posttrain.cli", *args],
        capture_output=True,
        env=os.environ.copy(),
        timeout=120,
    )


def assert_no_controls(data: bytes, where: str, litter: bool = True) -> None:
    """No raw control character; with `litter`, no remains of a sequence either."""
    text = data.decode("utf-8")
    for bad in ("\x1b", "\x07", "\u009b", "\r", *(("]52;", "]8;;", "[2J") if litter else ())):
        assert bad not in text, (where, bad, text[-400:])


def test_the_cli_prints_logs_and_traces_without_control_characters(project):
    logs, trace = cli("run", "logs", RUN), cli("run", "trace", RUN, "--step", "1")
    for name, out in (("run logs", logs), ("run trace", trace)):
        assert out.returncode == 0, out.stderr.decode()
        assert_no_controls(out.stdout, name)
        assert "model said: clip" in out.stdout.decode() or "clear" in out.stdout.decode()
        assert "[link=http://evil.example]m[/link]" in out.stdout.decode()  # text, not a link


def test_the_cli_json_escapes_control_characters_and_keeps_the_text(project):
    logs = cli("run", "logs", RUN, "--json")
    trace = cli("run", "trace", RUN, "--step", "1", "--json")
    for name, out in (("run logs --json", logs), ("run trace --json", trace)):
        assert out.returncode == 0, out.stderr.decode()
        assert_no_controls(out.stdout, name, litter=False)  # escaped as \\u001b: text
    lines = json.loads(logs.stdout)["lines"]
    assert any(line["message"] == "model said: " + ESCAPES for line in lines)
    steps = json.loads(trace.stdout)["steps"]
    assert steps["1"][0]["completion"].endswith(ESCAPES)


# -- serve in / ------------------------------------------------------------------------------


def serve_in_root(tmp_path, **env_extra):
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_ROOTS"}
    return subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "serve"],
        cwd="/",
        env={**env, "POSTTRAIN_HOME": str(tmp_path), "PYTHONPATH": str(Path.cwd()), **env_extra},
        stdin=subprocess.DEVNULL,  # the client hangs up at once: the server starts, then ends
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_started_in_the_filesystem_root_serves_without_allowing_every_path(tmp_path):
    out = serve_in_root(tmp_path)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "started in / , which is not an allowed folder" in out.stderr
    assert f"allowed: {tmp_path.resolve()}" in out.stderr and "POSTTRAIN_ROOTS" in out.stderr


def test_serve_refuses_a_root_of_slash_named_in_posttrain_roots(tmp_path):
    out = serve_in_root(tmp_path, POSTTRAIN_ROOTS="/")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "POSTTRAIN_ROOTS names /" in out.stderr and "--allow-root" in out.stderr


def test_a_working_directory_of_root_is_never_an_allowed_folder(tmp_path, monkeypatch):
    from posttrain.core.paths import allowed_roots, confine, filesystem_root_allowed

    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir("/")
    monkeypatch.delenv("POSTTRAIN_ROOTS", raising=False)
    assert Path("/") not in allowed_roots() and not filesystem_root_allowed()
    with pytest.raises(ConfigError, match="outside the allowed folders"):
        confine("/etc/passwd", "data file")
    monkeypatch.setenv("POSTTRAIN_ROOTS", str(tmp_path))
    assert tmp_path.resolve() in allowed_roots() and not filesystem_root_allowed()
    monkeypatch.setenv("POSTTRAIN_ROOTS", "/")
    assert filesystem_root_allowed()


# -- generated: the hostile families, over every tool --------------------------------------

SECRET = 'pässwörd"\\-1234'
hostile_text = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x9F), max_size=30),  # C0, ESC, DEL, C1
    st.sampled_from([SECRET, json.dumps(SECRET), "\x1b]52;c;aGk=\x07", "\x00", "²", "{"]),
    st.builds(
        lambda column, tail: "{" + column + tail + "}",
        st.sampled_from(["prompt", "0", "", "prompt.x", "prompt[9]"]),
        st.sampled_from(["", ":>200000000", ":{prompt}", "!r", "!z", ":" + "9" * 40]),
    ),
)


def hostile_arguments() -> st.SearchStrategy:
    spec = st.fixed_dictionaries(
        {
            "model": st.fixed_dictionaries(
                {
                    "name": st.just("tiny-local"),
                    "chat_template_kwargs": st.dictionaries(
                        st.sampled_from(["chat_template", "tools", "tokenize", "enable_thinking"]),
                        hostile_text | st.booleans() | st.lists(st.integers(), max_size=2),
                        max_size=2,
                    ),
                }
            ),
            "dataset": st.fixed_dictionaries(
                {"path": st.just("data.jsonl"), "prompt_template": hostile_text}
            ),
            "name": hostile_text,
        }
    )
    paid = spec.map(lambda s: {**s, "compute": {"backend": "modal"}})  # never starts locally
    return st.one_of(
        st.tuples(st.just("plan"), st.fixed_dictionaries({"spec": spec})),
        st.tuples(st.just("launch"), st.fixed_dictionaries({"spec": paid})),
        st.tuples(
            st.just("smoke_run"),
            st.fixed_dictionaries({"spec": paid, "backend": st.just("modal")}),
        ),
        st.tuples(
            st.sampled_from(["get_run", "cancel_run", "evaluate"]),
            st.fixed_dictionaries({"run_id": hostile_text}),
        ),
        st.tuples(st.just("list_runs"), st.fixed_dictionaries({"status": hostile_text})),
        st.tuples(
            st.just("export_run"),
            st.fixed_dictionaries(
                {"run_id": st.just(RUN), "out": hostile_text, "push_to_hub": hostile_text}
            ),
        ),
        st.tuples(st.just("check_dataset"), st.fixed_dictionaries({"spec": spec})),
        st.tuples(
            st.just("tail_logs"),
            st.fixed_dictionaries(
                {"run_id": st.just(RUN), "search": hostile_text, "after": st.integers(0, 2**80)}
            ),
        ),
        st.tuples(
            st.just("sample_traces"),
            st.fixed_dictionaries({"run_id": st.just(RUN), "steps": hostile_text}),
        ),
        st.tuples(
            st.just("check_reward"),
            st.fixed_dictionaries(
                {
                    "reward": st.just("f.py:score"),
                    "data": st.just("data.jsonl"),
                    "params": st.fixed_dictionaries(
                        {
                            "value_range": st.one_of(
                                hostile_text, st.lists(st.integers(), max_size=3)
                            )
                        }
                    ),
                }
            ),
        ),
    )


@pytest.mark.slow
def test_hostile_families_get_clear_errors_no_secret_and_a_live_server(project, monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", SECRET)
    Path("f.py").write_text(
        "def score(completions, **kw):\n    return [0.0 for _ in completions]\n"
    )
    server = build_server()

    @settings(
        max_examples=120,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(call=hostile_arguments())
    def check(call):
        tool, arguments = call

        async def main():
            async with Client(server, mode="legacy") as client:
                t = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                assert time.perf_counter() - t < CALL_BOUND_S, (tool, arguments)
                assert not (await client.call_tool("list_runs", {})).is_error
                return result

        result = asyncio.run(main())
        text = result.content[0].text if result.content else ""
        out = text + json.dumps(result.structured_content or {})
        for form in (SECRET, json.dumps(SECRET)[1:-1], repr(SECRET)[1:-1]):
            assert form not in out, (tool, arguments)
        if result.is_error:
            for bad in ("Traceback", "internal error", "storage problem"):
                assert bad not in text, (tool, arguments, text[:300])

    check()


def test_a_budget_in_config_yaml_that_is_not_a_number_is_a_clear_error(home):
    from posttrain.ledger.budget import BudgetPolicy

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("budget:\n  max_run_usd: lots\n")
    with pytest.raises(ConfigError, match=r"budget.max_run_usd is 'lots', not a number"):
        BudgetPolicy.load()
    (home / "config.yaml").write_text("budget: 25\n")
    with pytest.raises(ConfigError, match="budget must be a mapping"):
        BudgetPolicy.load()
    (home / "config.yaml").write_text("budget:\n  max_run_usd: .inf\n")
    with pytest.raises(ConfigError, match="finite number of dollars"):
        BudgetPolicy.load()


def test_a_verbose_get_run_of_a_long_run_is_thinned_to_a_bounded_answer():
    from posttrain.tools.runs import MAX_METRIC_POINTS, thin

    points = [{"step": i} for i in range(1, 1_000_001)]  # a million-step run
    kept = thin(points, MAX_METRIC_POINTS)
    steps = [p["step"] for p in kept]
    assert len(kept) == MAX_METRIC_POINTS == len(set(steps))
    assert steps[0] == 1 and steps[-1] == 1_000_000 and steps == sorted(steps)
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    assert gaps <= {500, 501}  # evenly spaced
    assert thin(points[:10], MAX_METRIC_POINTS) == points[:10]  # short runs: every step


@pytest.mark.parametrize("mode", MODES)
def test_a_secret_echoed_back_in_a_result_is_masked_before_serialisation(
    project, mode, monkeypatch
):
    """The agent put a secret into the spec's name: plan echoes the resolved spec, and the
    secret must not leave in any form (the SDK JSON-escapes non-ASCII and quotes)."""
    monkeypatch.setenv("DB_PASSWORD", SECRET)

    async def main():
        async with Client(build_server(), mode=mode) as client:
            spec = {"model": "tiny-local", "dataset": {"path": "data.jsonl"}, "name": SECRET}
            return await client.call_tool("plan", {"spec": spec})

    result = asyncio.run(main())
    assert not result.is_error, result.content
    out = result.content[0].text + json.dumps(result.structured_content)
    out += json.dumps(result.structured_content, ensure_ascii=False)
    for form in (SECRET, json.dumps(SECRET)[1:-1], json.dumps(SECRET, ensure_ascii=False)[1:-1]):
        assert form not in out
    assert result.structured_content["spec"]["name"] == "[redacted]"


@pytest.mark.parametrize("mode", MODES)
def test_a_secret_in_an_argument_the_sdk_refuses_is_masked_in_its_error(project, mode, monkeypatch):
    """The SDK validates arguments before posttrain sees them, and its error echoes the input:
    the server's result middleware masks it there too."""
    monkeypatch.setenv("DB_PASSWORD", SECRET)

    async def main():
        async with Client(build_server(), mode=mode) as client:
            refused = await client.call_tool("list_runs", {"status": SECRET})
            assert not (await client.call_tool("list_runs", {})).is_error
            return refused

    refused = asyncio.run(main())
    text = refused.content[0].text
    assert refused.is_error and "status" in text and "[redacted]" in text
    for form in (SECRET, json.dumps(SECRET)[1:-1], repr(SECRET)[1:-1]):
        assert form not in text


def test_a_secret_in_a_request_is_masked_in_json_rpc_errors_and_in_the_log(
    project, monkeypatch, caplog
):
    """An unknown tool or resource named after a secret: the SDK's JSON-RPC error and its log
    lines quote the request; neither may carry the secret."""
    import logging

    from mcp.shared.exceptions import MCPError

    monkeypatch.setenv("DB_PASSWORD", SECRET)
    caplog.set_level(logging.INFO)

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            unknown = await client.call_tool(SECRET, {})
            with pytest.raises(MCPError) as raised:
                await client.read_resource(f"posttrain://runs/{SECRET}")
            assert not (await client.call_tool("list_runs", {})).is_error
            return unknown, str(raised.value)

    unknown, error = asyncio.run(main())
    assert unknown.is_error and unknown.content[0].text == "Unknown tool: [redacted]"
    assert "posttrain://runs/[redacted]" in error
    logged = caplog.text + "".join(r.getMessage() for r in caplog.records)
    assert "failed" in logged  # the SDK did log the calls
    for text in (error, logged):
        for form in (SECRET, json.dumps(SECRET)[1:-1], repr(SECRET)[1:-1]):
            assert form not in text
