"""Hostile user code and secrets that try to slip out (issue 15, findings 1, 2, 3 and 7).

A reward is someone's code: whatever it does at import or when it scores (exit, Ctrl-C,
os._exit, fork and linger), the server answers with a clear error and keeps serving, and
nothing it started is left running. A secret with non-ASCII characters, quotes and
backslashes is masked in every form it can take (raw, JSON-escaped, repr) wherever run data
leaves: events.jsonl, the index, get_run, tail_logs, error messages, even when cut short.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from posttrain.gpu.reporter import LOG_MESSAGE_CHARS, Reporter
from posttrain.rewards import isolated
from posttrain.rewards.registry import get_reward
from posttrain.runs.layout import write_json_atomic
from posttrain.server.app import build_server

SECRET = 'pässwörd"\\-1234'  # non-ASCII, a quote and a backslash: JSON and repr escape them
MODES = ("legacy", "2026-07-28")


def forms(secret: str) -> list[str]:
    """Every way the secret could be written: as is, JSON-escaped (both ways), repr'd."""
    return [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
    ]


def pieces(secret: str, width: int = 6) -> list[str]:
    """Every run of `width` characters of the secret (a cut could keep any of them)."""
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


def assert_no_secret(text: str, where: str) -> None:
    for form in forms(SECRET):
        assert form not in text, (where, form, text[:300])
    for piece in pieces(SECRET):
        assert piece not in text, (where, piece, text[:300])


def assert_no_secret_in_files(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for form in forms(SECRET):
                assert form.encode() not in data, (path, form)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working folder (an allowed root) with a small data file, and a private home."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "20")
    Path("data.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"a poem about the sea {i}", "reference": "the sea is wide"})
            + "\n"
            for i in range(6)
        )
    )
    return tmp_path


async def alive(client: Client) -> None:
    """The same server still answers."""
    assert not (await client.call_tool("list_runs", {})).is_error


def reward_file(name: str, body: str) -> str:
    Path(name).write_text(body)
    return f"{name}:score"


GOOD_SCORE = "def score(completions, **kw):\n    return [0.5 for _ in completions]\n"
HOSTILE_AT_IMPORT = {
    "raise SystemExit(3)\n": "SystemExit",
    "raise KeyboardInterrupt\n": "KeyboardInterrupt",
    "import os\nos._exit(7)\n": "code 7",
    "import sys\nsys.exit('bye')\n": "SystemExit",
}


@pytest.mark.parametrize("mode", MODES)
def test_a_reward_that_exits_at_import_is_a_clear_error_and_the_server_survives(project, mode):
    refs = {
        reward_file(f"hostile{i}.py", code + GOOD_SCORE): said
        for i, (code, said) in enumerate(HOSTILE_AT_IMPORT.items())
    }
    spec = {"model": "tiny-local", "dataset": {"path": "data.jsonl"}}

    async def main():
        async with Client(build_server(), mode=mode) as client:
            for ref, said in refs.items():
                for tool, args in (
                    ("check_reward", {"reward": ref, "data": "data.jsonl", "rows": 4}),
                    ("smoke_run", {"spec": {**spec, "reward": ref}, "steps": 1}),
                ):
                    result = await client.call_tool(tool, args)
                    text = result.content[0].text
                    assert result.is_error, (tool, ref, result.structured_content)
                    assert said in text and ref.split(":")[0] in text, (tool, text)
                    assert "Traceback" not in text and "internal error" not in text, text
                    await alive(client)

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_a_module_reward_runs_only_in_the_child_and_a_missing_function_is_refused(project, mode):
    spec = {"model": "tiny-local", "dataset": {"path": "data.jsonl"}}

    async def main():
        async with Client(build_server(), mode=mode) as client:
            # unittest.__main__ calls unittest.main() at import: SystemExit, in the child
            exits = await client.call_tool(
                "check_reward", {"reward": "unittest.__main__:x", "data": "data.jsonl"}
            )
            assert exits.is_error and "SystemExit" in exits.content[0].text
            await alive(client)
            for tool in ("smoke_run", "launch"):
                missing = await client.call_tool(tool, {"spec": {**spec, "reward": "this:x"}})
                assert missing.is_error, missing.structured_content
                assert "reward module 'this' has no function 'x'" in missing.content[0].text
                await alive(client)
        assert not list((project / "home" / "runs").glob("run-*")), "a run was started"

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_an_exit_inside_a_tool_body_is_an_error_result_not_a_dead_server(home, monkeypatch, mode):
    from posttrain.tools import plan as plan_module

    def leave(*args, **kwargs):
        raise SystemExit(0)

    monkeypatch.setattr(plan_module, "estimate", leave)

    async def main():
        async with Client(build_server(), mode=mode) as client:
            for _ in range(3):
                broken = await client.call_tool("plan", {"spec": {}})
                assert broken.is_error and "SystemExit" in broken.content[0].text
                await alive(client)

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_over_stdio_hostile_rewards_leave_the_server_process_serving(project, mode):
    exits = reward_file("exits.py", "raise SystemExit(0)\n" + GOOD_SCORE)
    dies = reward_file("dies.py", "import os\nos._exit(0)\n" + GOOD_SCORE)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "posttrain.cli", "serve"],
        env={**os.environ, "POSTTRAIN_HOME": str(project / "home")},
        cwd=str(project),
    )

    async def main():
        async with Client(params, mode=mode) as client:
            for ref in (exits, dies, "unittest.__main__:x"):
                for tool, args in (
                    ("check_reward", {"reward": ref, "data": "data.jsonl", "rows": 4}),
                    ("smoke_run", {"spec": {"model": "tiny-local", "reward": ref}, "steps": 1}),
                ):
                    result = await client.call_tool(tool, args)
                    assert result.is_error, (tool, ref, result.structured_content)
                    assert "Traceback" not in result.content[0].text
                    await alive(client)

    asyncio.run(main())


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def forked_pid(path: Path, timeout_s: float = 10) -> int:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.strip():
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"the reward never wrote {path}")


LINGER = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],\n"
    "                         stdout=sys.stdout, stderr=sys.stderr)\n"
    "open({pidfile!r}, 'w').write(str(child.pid))\n"
)


def test_a_reward_whose_fork_lingers_answers_at_once_and_leaves_no_process(project):
    pidfile = project / "lingering.pid"
    ref = reward_file("forks.py", LINGER.format(pidfile=str(pidfile)) + GOOD_SCORE)

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            t = time.perf_counter()
            result = await client.call_tool(
                "check_reward", {"reward": ref, "data": "data.jsonl", "rows": 4}
            )
            seconds = time.perf_counter() - t
            assert not result.is_error, result.content[0].text
            assert seconds < 15, f"{seconds:.1f} s: the lingering fork held the answer"
            await alive(client)

    asyncio.run(main())
    pid = forked_pid(pidfile)
    deadline = time.time() + 5
    while not gone(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert gone(pid), f"process {pid}, forked by the reward, outlived the check"


def test_a_reward_that_forks_and_hangs_is_stopped_at_the_limit_with_its_fork(project, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "4")
    pidfile = project / "hung.pid"
    ref = reward_file(
        "hangs.py", LINGER.format(pidfile=str(pidfile)) + "child.wait()\n" + GOOD_SCORE
    )

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            result = await client.call_tool("check_reward", {"reward": ref, "data": "data.jsonl"})
            assert result.is_error and "did not finish" in result.content[0].text
            await alive(client)

    asyncio.run(main())
    pid = forked_pid(pidfile)
    deadline = time.time() + 5
    while not gone(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert gone(pid), f"process {pid}, forked by the reward, outlived the time limit"


def test_what_a_reward_prints_cannot_forge_its_answer(project):
    honest = reward_file(
        "chatty.py",
        'print(\'{"columns": ["nope"]}\')\n'
        "def score(completions, answer_key, **kw):\n    return [0.0 for _ in completions]\n",
    )
    forger = reward_file(
        "forger.py", "import os, sys\nprint('{\"columns\": []}')\nsys.stdout.flush()\nos._exit(0)\n"
    )
    from posttrain.core.errors import RewardError
    from posttrain.rewards.isolated import inspect_reward

    assert inspect_reward(honest, {})["columns"] == ["answer_key"]
    with pytest.raises(RewardError, match="exited with code 0"):
        inspect_reward(forger, {})


# -- secrets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_secret_that_escaping_changes_is_masked_in_events_index_and_answers(
    project, monkeypatch, mode
):
    monkeypatch.setenv("DB_PASSWORD", SECRET)
    home = project / "home"
    run_id = "run-260101-000000-beef"
    folder = home / "runs" / run_id
    write_json_atomic(
        folder / "run.json",
        {"run_id": run_id, "backend": "local", "created_at": time.time(), "spec_id": "abc"},
    )
    (folder / "spec.json").write_text(
        json.dumps({"model": {"name": "tiny-local"}, "algorithm": {"kind": "grpo", "steps": 2}})
    )
    leaky = reward_file(
        "leaky.py",
        "import os\n"
        "def score(completions, **kw):\n"
        "    raise ValueError('cannot reach db with ' + os.environ['DB_PASSWORD'])\n",
    )
    reporter = Reporter(folder)
    reporter.stage("training")
    reporter.log(f"connecting with {SECRET!r} and {json.dumps(SECRET)}")
    # a log line cut at its bound right inside the secret
    reporter.log("x" * (LOG_MESSAGE_CHARS - 6) + SECRET + " and more")
    try:
        get_reward(leaky)(["a completion"], prompts=["p"])
    except Exception as exc:  # the reward's own error, as the trainer would meet it
        reporter.failure(exc)
    reporter.close()

    async def main():
        async with Client(build_server(), mode=mode) as client:
            detail = await client.call_tool("get_run", {"run_id": run_id, "verbose": True})
            logs = await client.call_tool("tail_logs", {"run_id": run_id, "tail": 50})
            found = await client.call_tool("tail_logs", {"run_id": run_id, "search": "connecting"})
            await alive(client)
            return detail, logs, found

    detail, logs, found = asyncio.run(main())
    assert detail.structured_content["status"] == "failed"
    assert "[redacted]" in detail.structured_content["cause"]
    for name, result in (("get_run", detail), ("tail_logs", logs), ("search", found)):
        assert not result.is_error, result.content[0].text
        assert_no_secret(json.dumps(result.structured_content, ensure_ascii=False), name)
        assert_no_secret(json.dumps(result.structured_content), name)
        assert_no_secret(result.content[0].text, name)
    assert "[redacted]" in json.dumps(logs.structured_content)
    assert_no_secret_in_files(home)  # events.jsonl, the index and its WAL


def test_a_secret_cut_by_the_stderr_tail_is_masked_before_the_cut(project, monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", SECRET)
    # the child's stderr ends with the secret and 590 more characters: a 600-character tail
    # taken before redaction would keep the secret's last 10 characters
    ref = reward_file(
        "cut.py",
        "import os, sys\n"
        "sys.stderr.write('connect ' + os.environ['DB_PASSWORD'] + 'y' * 590)\n"
        "sys.stderr.flush()\n"
        "os._exit(1)\n" + GOOD_SCORE,
    )

    async def main():
        async with Client(build_server(), mode="legacy") as client:
            result = await client.call_tool("check_reward", {"reward": ref, "data": "data.jsonl"})
            await alive(client)
            return result

    result = asyncio.run(main())
    assert result.is_error and "code 1" in result.content[0].text
    assert_no_secret(result.content[0].text, "check_reward")
    assert os.environ["DB_PASSWORD"] == SECRET


def test_calls_past_their_deadline_are_abandoned_and_free_their_workers(project, monkeypatch):
    """More hung calls than there are worker threads: each is abandoned at its deadline with
    a clear error, and the same server answers list_runs at once afterwards."""
    import anyio

    monkeypatch.setenv("POSTTRAIN_CALL_DEADLINE_S", "2")
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "30")
    ref = reward_file("sleepy.py", "import time\ntime.sleep(600)\n" + GOOD_SCORE)

    async def main():
        anyio.to_thread.current_default_thread_limiter().total_tokens = 3
        async with Client(build_server(), mode="legacy") as client:
            args = {"reward": ref, "data": "data.jsonl", "rows": 4}
            results = []

            async def hang():
                results.append(await client.call_tool("check_reward", args))

            t = time.time()
            async with anyio.create_task_group() as tg:
                for _ in range(4):  # one more than the pool
                    tg.start_soon(hang)
            took = time.time() - t
            t = time.time()
            await alive(client)
            return results, took, time.time() - t

    try:
        results, took, answer_s = asyncio.run(main())
    finally:  # the abandoned children would sleep on past the test: what the exit would do
        isolated._kill_live_children()
    assert len(results) == 4 and all(r.is_error for r in results)
    assert all("deadline of 2 s and was abandoned" in r.content[0].text for r in results)
    assert took < 12, took  # 2 s each, the fourth after a slot came free: not 30 s
    assert answer_s < 5, answer_s


# A reward that starts a process of its own (in its process group) at import.
SPAWNS = (
    "import subprocess, sys\n"
    "spawned = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
)


@pytest.mark.parametrize("ends", ["exits", "is killed", "exits, the reward having forked"])
def test_a_hung_rewards_process_ends_with_the_process_that_gave_up_on_it(project, ends):
    """A caller that abandoned a call (the server, at its deadline) and then ends before the
    reward's own limit, by exiting or by SIGKILL (no exit handler runs): the reward's process,
    which would sleep on, ends with it; so does a process the reward started, when the caller
    exits (its exit kills the reward's process group)."""
    pid_file = project / "reward.pid"
    forks = ends.endswith("forked")
    watched = "spawned.pid" if forks else "os.getpid()"
    ref = reward_file(
        "sleepy.py",
        "import os, time\n"
        + (SPAWNS if forks else "")
        + f"open('pid.tmp', 'w').write(str({watched}))\n"
        f"os.replace('pid.tmp', {str(pid_file)!r})\n"  # whole, or not there
        "time.sleep(600)\n" + GOOD_SCORE,
    )
    caller = (
        "import os, threading, time\n"
        "from posttrain.rewards.isolated import inspect_reward\n"
        f"threading.Thread(target=inspect_reward, args=({ref!r}, {{}}, 300), daemon=True).start()\n"
        f"while not os.path.exists({str(pid_file)!r}): time.sleep(0.05)\n"
    )
    if ends == "is killed":
        caller += "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    done = subprocess.run([sys.executable, "-c", caller], timeout=120)
    assert done.returncode == (-9 if ends == "is killed" else 0)
    pid = int(pid_file.read_text())
    deadline = time.time() + 10
    while running(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not running(pid), f"the process {pid} outlived the caller"


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's parent may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_reward_whose_import_hangs_is_said_within_the_reward_limit_naming_file_and_setting(
    project, monkeypatch
):
    monkeypatch.setenv("POSTTRAIN_REWARD_TIMEOUT_S", "3")
    ref = reward_file("stuck.py", "import time\ntime.sleep(600)\n" + GOOD_SCORE)
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "reward", "check", ref, "--data", "data.jsonl"],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    error = json.loads(done.stderr)["error"]
    assert done.returncode == 2 and time.time() - started < 30
    assert "stuck.py" in error and "within 3 s" in error
    assert "POSTTRAIN_REWARD_TIMEOUT_S (60 s by default)" in error
