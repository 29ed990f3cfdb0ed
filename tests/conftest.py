"""Shared fixtures. Tests use real parts: the real CMU dictionary, the real MiniLM, real files."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach the hub, and fail fast if asked
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# OpenMP threads that wait for work sleep instead of spinning: the trainers the tests start
# (and this process's torch) share 2 cores with each other and with other suites, and
# spinning threads steal them. 150 steps of a small MLP, 2 threads, on 2 cores with 3 other
# trainers running (load 9-11): default 145 s, ACTIVE > 300 s, PASSIVE 7-11 s. Set before
# anything imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# One thread per trainer: `make test` runs 4 workers on 2 cores, and the tiny model's
# matrices are too small for a second thread to pay.
os.environ.setdefault("POSTTRAIN_CPU_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "rhyme_qa.jsonl"


@pytest.fixture(scope="session")
def qa_rows() -> list[dict]:
    """The bundled question/reference/verse rows."""
    return [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def empty_hf_home(tmp_path_factory) -> Path:
    """One empty Hugging Face home for the whole run, shared by xdist's workers. A launch's
    environment keys its fork server: one folder for every module means one server for all
    their runs, not one more (~7 CPU-s of imports, its first run started plainly) each."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "hf-empty"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A private POSTTRAIN_HOME for one test (runs, index)."""
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="session")
def modal_platform(tmp_path_factory):
    """One fake Modal control plane per test process (tests/modal_fake), posttrain's app
    deployed there once by the SDK's own deploy path: the real modal SDK talks to it over gRPC
    and HTTP. Once per process because the SDK keeps one client a process, bound to the
    server's address, and the objects a deploy hydrated (Volumes, secrets, functions)."""
    from tests.modal_fake import FakeModal

    fake = FakeModal(tmp_path_factory.mktemp("modal")).start()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in fake.env().items():
            patch.setenv(key, value)
        from posttrain.gpu import modal_app

        modal_app.app.deploy()
    deployed = fake.snapshot()
    yield fake, deployed
    fake.stop()


@pytest.fixture
def modal_fake(modal_platform, monkeypatch):
    """The fake Modal as deployed, the SDK pointed at it; every container a test started is
    stopped after it, and what it changed (apps, tags, Volumes, secrets) is put back."""
    fake, deployed = modal_platform
    fake.restore(deployed)
    for key, value in fake.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POSTTRAIN_COMMIT_EVERY_S", "1")  # the containers' commits, for tests
    yield fake
    fake.restore(deployed)


@pytest.fixture
def no_modal_token(monkeypatch):
    """The real modal SDK with no token of any account (none here, nor in CI)."""
    for key in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_SERVER_URL"):
        monkeypatch.delenv(key, raising=False)


def wait_for(predicate, timeout_s: float, every_s: float = 0.5):
    """Poll until predicate() returns a truthy value; fail after timeout_s (no bare sleeps)."""
    import time

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s} s")


def wait_finished(run_id: str, timeout_s: float, ctx=None, every_s: float = 0.5):
    """The run's detail once its status is final (succeeded, failed or cancelled)."""
    from posttrain.runs.layout import FINAL_STATUSES
    from posttrain.tools.runs import get_run

    def final():
        detail = get_run(run_id, ctx=ctx)
        return detail if detail.status in FINAL_STATUSES else None

    return wait_for(final, timeout_s=timeout_s, every_s=every_s)


async def mcp_wait_finished(client, run_id: str, timeout_s: float) -> dict:
    """get_run over MCP, polled each second until the run's status is final (or the time is
    up); the last answer's structured content."""
    import asyncio
    import time

    from posttrain.runs.layout import FINAL_STATUSES

    deadline = time.time() + timeout_s
    while True:
        got = (await client.call_tool("get_run", {"run_id": run_id})).structured_content
        if got["status"] in FINAL_STATUSES or time.time() > deadline:
            return got
        await asyncio.sleep(1)


def kill_leftover_runs(home_dir: Path) -> None:
    """Kill the process groups of runs a failed test left behind, so they cannot slow the
    tests after it (each supervisor leads its own group)."""
    import contextlib
    import signal

    for process in (home_dir / "runs").glob("*/process.json"):
        pid = json.loads(process.read_text()).get("supervisor_pid")
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def training_args(checkpoint: Path):
    """The TrainingArguments a checkpoint was trained with (the Trainer pickles them there)."""
    import torch

    return torch.load(checkpoint / "training_args.bin", weights_only=False)


@contextlib.contextmanager
def offline_in(folder: Path, tmp_path_factory, empty_hf_home: Path):
    """A user's session in `folder`: its own POSTTRAIN_HOME, an empty Hugging Face cache, no
    hub; the runs it left are killed after. Yields the home."""
    from posttrain.gpu import tokenizers

    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        mp.setenv("HF_HOME", str(empty_hf_home))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.chdir(folder)
        tokenizers._load.cache_clear()
        try:
            yield home
        finally:
            kill_leftover_runs(home)
            tokenizers._load.cache_clear()


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, timeout_s: float = 30) -> None:
    """Until something accepts connections on 127.0.0.1:port."""
    import socket

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, timeout_s=timeout_s, every_s=0.2)


# Tool-calling SFT's text checked against an independent rendering: the trainer's batches
# (tests/gpu) and the CLI's path (tests/cli).
def own_rendering(tokenizer, raw: dict) -> str:
    """The test's own rendering of a raw row, independent of posttrain: calls reduced to
    {name, arguments: dict} by hand, the model's original chat template, nothing else."""
    tools = raw["functions"]
    tools = json.loads(tools) if isinstance(tools, str) else tools
    messages = []
    for m in raw["conversation"]:
        m = {**m, "content": m["content"] if m["content"] is not None else ""}
        if m["role"] == "tool" and not isinstance(m["content"], str):
            m["content"] = json.dumps(m["content"], ensure_ascii=False)
        if "tool_calls" in m:
            calls = [c.get("function", c) for c in m["tool_calls"]]
            m["tool_calls"] = [
                {"name": c["name"], "arguments": json.loads(c["arguments"])}
                if isinstance(c["arguments"], str)
                else c
                for c in calls
            ]
        messages.append(m)
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)


# A finished run written as the trainer writes one, 400 steps with traces at every step: the
# server's lean results (tests/server) and the CLI's text views (tests/cli) read it.
LONG_RUN_STEPS, LONG_RUN_SAMPLES = 400, 8
LONG_RUN = "run-261202-000000-lean"
LONG_RUN_TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
        for i in range(12)
    ]
)
LONG_RUN_SYSTEM = (
    "<|im_start|>system\nYou are a careful assistant.\n\n# Tools\n<tools>\n"
    + LONG_RUN_TOOLS
    + ("\n</tools><|im_end|>\n")
)


@pytest.fixture
def long_run(home):
    """A finished run written as the trainer writes one: 400 steps, traces at every step."""
    import time

    from posttrain.runs.layout import EVENTS, RUN_META, SPEC
    from tests.specs import tiny

    run_dir = home / "runs" / LONG_RUN
    (run_dir / "traces").mkdir(parents=True)
    (run_dir / SPEC).write_text(
        json.dumps({**tiny(steps=LONG_RUN_STEPS), "model": {"name": "tiny-local"}})
    )
    t0 = time.time() - 3600
    (run_dir / RUN_META).write_text(
        json.dumps(
            {"run_id": LONG_RUN, "backend": "local", "created_at": t0, "status": "submitted"}
        )
    )
    events = [{"t": t0, "type": "stage", "stage": "training"}]
    for step in range(1, LONG_RUN_STEPS + 1):
        t = t0 + step
        events.append(
            {
                "t": t,
                "type": "metrics",
                "phase": "train",
                "step": step,
                "reward": step / LONG_RUN_STEPS,
                "step_time_s": 1.0,
                "completion_length": 100 - step * 0.2,
                "components": {"rhyme": 0.5},
            }
        )
        events.append({"t": t, "type": "log", "level": "info", "message": f"step {step} " * 20})
        rows = [
            {
                "step": step,
                "idx": i,
                "group": i // 4,
                "prompt": f"question {step}.{i} " * 10,
                "completion": f"answer {i} " * 60,
                "reward": i / LONG_RUN_SAMPLES,
                "components": {"rhyme": 0.5},
                "reference": "the reference answer " * 5,
                "rendered": LONG_RUN_SYSTEM + f"<|im_start|>user\nquestion {step}.{i}<|im_end|>\n",
            }
            for i in range(LONG_RUN_SAMPLES)
        ]
        path = f"traces/step_{step:04d}.jsonl"
        (run_dir / path).write_text("".join(json.dumps(r) + "\n" for r in rows))
        events.append({"t": t, "type": "trace", "step": step, "path": path, "n": LONG_RUN_SAMPLES})
    events.append({"t": t0 + LONG_RUN_STEPS + 1, "type": "result", "status": "succeeded"})
    (run_dir / EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    return run_dir


# The modules that take longest, in the order they should start. Under pytest-xdist
# (`make test` runs `-n 4 --dist loadfile --no-loadscope-reorder`) a worker takes whole
# modules in collection order, so the long ones start first and the short ones fill in
# around them; without this the demo (minutes) started 10 minutes into the suite and
# finished alone. xdist starts each worker with at least two modules, the 5th in this order
# going to the demo's worker, where it waits out the demo (~8 min): a quick one goes there, so
# that worker takes more only once the demo is done (test_groups.py there ran after the demo,
# at the end of the suite).
SLOW_FIRST = (
    "test_demo.py",
    "test_tool_sft_flow.py",
    "test_dry_run.py",
    "test_local_limits.py",
    "test_price.py",  # 2 s: the demo worker's second module
    # Then by wall time in the suite, longest first (POSTTRAIN_TEST_CPU_LOG, clean clone,
    # 2026-12-03): the last modules to start should be short. test_real_model.py (66 s for its
    # export test) started last in alphabetical order and kept a core idle for ~55 s.
    "test_forkserver.py",
    "test_experiment_mcp.py",  # four tiny runs queued, then an experiment's evaluation
    "test_real_model.py",
    "test_hostile.py",
    "test_environments.py",
    "test_server.py",
    "test_groups.py",
    "test_modal.py",
    "test_environment_training.py",
    "test_hostile_input.py",
    "test_tokenizers.py",
    "test_resume.py",
    "test_false_deaths.py",
    "test_security.py",
    "test_evaluate.py",
    "test_queue.py",
    "test_jobs.py",
    "test_faults.py",
    "test_hostile_code.py",
    "test_dashboard.py",
    "test_launch_path.py",
    "test_training.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))  # stable: order kept


# Where the suite's CPU goes, per test: POSTTRAIN_TEST_CPU_LOG=FILE appends one line a test
# (the test's id, this process's CPU seconds, its reaped children's, and wall seconds). The
# suite is CPU-bound on 2 cores, so `--durations` (wall, shared) cannot say what to cut.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("POSTTRAIN_TEST_CPU_LOG")
    if not path:
        yield
        return
    import resource
    import time

    def now():
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time(), kids.ru_utime + kids.ru_stime, time.monotonic()

    before = now()
    yield
    after = now()
    own, kids, wall = (b - a for a, b in zip(before, after, strict=True))
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{item.nodeid}\t{own:.2f}\t{kids:.2f}\t{wall:.2f}\n")


@contextlib.contextmanager
def trained_run(
    tmp_path_factory, spec: dict, rows: list[dict] | None = None, name: str = "rows.jsonl"
):
    """A run launched in its own home (on `rows`, when given, written there as `name`, the
    spec's dataset.path): yields (home, run_id) once it has succeeded; its processes are
    killed after."""
    from posttrain.tools.launch import launch

    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        if rows is not None:
            data = home / name
            data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            spec = {**spec, "dataset": {**spec["dataset"], "path": str(data)}}
        run_id = launch(spec).run_id
        detail = wait_finished(run_id, 300)
        assert detail.status == "succeeded", detail.cause
        try:
            yield home, run_id
        finally:
            kill_leftover_runs(home)


def answer_logps(model, tokenizer, prompt: list[dict], answer: list[dict]) -> list[float]:
    """Each answer token's log-likelihood after the prompt, by plain transformers: the oracle
    the evaluations' likelihoods are checked against."""
    import torch

    def ids(messages, **kw):
        return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, **kw)[
            "input_ids"
        ]

    head = ids(prompt, add_generation_prompt=True)
    full = ids([*prompt, *answer])
    start = next((i for i, (a, b) in enumerate(zip(head, full, strict=False)) if a != b), len(head))
    with torch.inference_mode():
        scores = model(torch.tensor([full])).logits[0].float().log_softmax(-1)
    return [float(scores[i - 1, full[i]]) for i in range(start, len(full))]


def evaluated(run: tuple[Path, str], monkeypatch):
    """evaluate of a trained run (k=1, two base passes), with what its oracle needs: the
    result, the run's final model and tokenizer by plain transformers, and its held-out rows."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain.tools.evaluate import evaluate

    home, run_id = run
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    outcome = evaluate(run_id, k=1, base_passes=2)
    assert outcome.status == "done", outcome
    run_dir = home / "runs" / run_id
    model = AutoModelForCausalLM.from_pretrained(run_dir / "final").eval()
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    held = [json.loads(line) for line in (run_dir / "holdout.jsonl").read_text().splitlines()]
    assert len(held) == outcome.result.tasks_used
    return outcome.result, model, tokenizer, held
