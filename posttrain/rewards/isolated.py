"""Running a user's reward out of the caller's process, with a time limit.

A reward file is someone's code: it may hang, leak, crash the interpreter or call exit().
The server and the CLI never import it: they read its columns (`inspect_reward`) and run the
probe battery on it (`probe_in_subprocess`) in a child process (`python -m
posttrain.rewards.isolated`, JSON in and out) and kill it after the time limit, so they
answer with a clear error and stay up. Only the trainer, itself a child, imports it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from posttrain.core.errors import RewardError
from posttrain.core.secrets import redact

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_MB = 8192  # address space, not resident: a probe child with MiniLM maps ~2.6 GB
STDERR_TAIL = 600  # characters of a failed child's stderr in the error (after redaction)
STDERR_READ_CHARS = 100_000  # what is read of it: redacted whole, then cut to the tail
ANSWER_CHARS = 5_000_000  # a probe report is a few kB (the answer is the last line)


# User code never outlives the server or the CLI that started it. A caller that gave up on a
# call (the server abandons one at its deadline) leaves behind the thread that would kill the
# child at its limit. Two guards: the child asks the kernel to kill it when that thread ends,
# however the process ends (die_with_parent, in the child), and a process that exits kills
# the groups it still has running, with whatever the children forked (_LIVE, at exit).
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()
PARENT_PID_ENV = "POSTTRAIN_ISOLATED_PARENT"


@atexit.register
def _kill_live_children() -> None:
    with _LIVE_LOCK:
        groups = list(_LIVE)
    for group in groups:
        _kill_group(group)


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def die_with_parent() -> None:
    """In a child: SIGKILL when the thread that started it ends (Linux PR_SET_PDEATHSIG);
    exit at once when that process has already gone (before the request was made)."""
    if sys.platform == "linux":
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and os.getppid() != int(parent):
        os._exit(1)


LOAD_SETTING = f"POSTTRAIN_REWARD_TIMEOUT_S ({DEFAULT_TIMEOUT_S:.0f} s by default)"
LOAD_POLL_S = 0.2  # how often the parent looks whether the child has loaded the user's code


def reward_timeout_s() -> float:
    """The limit for a user's reward in a child: $POSTTRAIN_REWARD_TIMEOUT_S, else 60 s."""
    return float(os.environ.get("POSTTRAIN_REWARD_TIMEOUT_S") or DEFAULT_TIMEOUT_S)


def inspect_reward(ref: str, params: dict[str, Any], timeout_s: float | None = None) -> dict:
    """A user reward's columns, read in a child process (its import is their code): the
    function must exist and take TRL's signature. Cached by the file's content."""
    key = (ref, json.dumps(params, sort_keys=True, default=str), _content_key(ref))
    if key not in _INSPECTED:
        job = {"op": "inspect", "reward": ref, "params": params}
        _INSPECTED[key] = _run(job, timeout_s, f"loading reward '{ref}'")
        while len(_INSPECTED) > 256:
            _INSPECTED.pop(next(iter(_INSPECTED)))
    return _INSPECTED[key]


_INSPECTED: dict[tuple[str, str, str], dict] = {}


def _content_key(ref: str) -> str:
    """The reward file's content hash (a module reference: its name, as it is installed)."""
    import hashlib

    from posttrain.core.paths import expand
    from posttrain.rewards.user import is_file_ref, split_ref

    target, _ = split_ref(ref)
    if not is_file_ref(target):
        return target
    try:
        return hashlib.sha256(expand(target).resolve().read_bytes()).hexdigest()
    except OSError:
        return "missing"  # the child says what is wrong with it


def probe_in_subprocess(job: dict[str, Any], timeout_s: float | None = None) -> dict:
    """Run run_probes(**job) in a child process; its report, or RewardError saying why not."""
    return _run({"op": "probe", **job}, timeout_s, "running the probe battery")


def score_in_subprocess(
    ref: str,
    params: dict[str, Any],
    batches: list[tuple[list[Any], list[dict[str, Any]]]],
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """score_rows(reward, completions, rows) for each (completions, rows) batch, in a child:
    [{"rewards": [...], "components": {name: [...]}}]. The limit grows with the work (the
    reward time limit per 1,000 completions, at least once)."""
    n = sum(len(completions) for completions, _ in batches)
    limit = timeout_s if timeout_s is not None else reward_timeout_s() * max(1.0, n / 1000)
    job = {"op": "score", "reward": ref, "params": params, "batches": batches}
    return _run(job, limit, f"scoring {n} completions")["scores"]


def _run(job: dict[str, Any], timeout_s: float | None, doing: str) -> dict:
    """One reward job in a child process (`run_child` with the reward's words)."""
    return run_child(
        job,
        timeout_s if timeout_s is not None else reward_timeout_s(),
        doing,
        what=f"reward '{job['reward']}'",
        slow_hint="it may hang (at import?) or be far too slow for training (it runs on every "
        f"sampled completion); {LOAD_SETTING} sets the limit",
    )


def run_child(
    job: dict[str, Any],
    timeout_s: float,
    doing: str,
    *,
    what: str,
    slow_hint: str,
    module: str = "posttrain.rewards.isolated",
    loaded: Path | None = None,
) -> dict:
    """One job for `python -m module` in a child process, killed at the limit; its JSON
    answer (the last line of its stdout) or RewardError saying why not. `loaded`: a file
    the child writes to once the user's code is imported; until then it has the load limit
    (reward_timeout_s) alone, whatever `timeout_s` the whole job has.

    The child leads its own process group, and the whole group is killed when the child
    ends or at the limit: user code that forks leaves nothing behind. Its output goes to
    files, not pipes, so a lingering grandchild holding them open cannot make code that
    returned at once look like code that hung."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", PARENT_PID_ENV: str(os.getpid())}
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        stdin.write(json.dumps(job, default=str).encode())
        stdin.seek(0)
        with _LIVE_LOCK:  # started and known as one step: an exit sees it or it never began
            child = subprocess.Popen(
                [sys.executable, "-m", module],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=os.getcwd(),
                start_new_session=True,
            )
            _LIVE.add(child.pid)
        load_s = reward_timeout_s()
        try:
            code = _wait_loaded(child, loaded, load_s) if loaded else None
            if code is None:
                code = child.wait(timeout=timeout_s)
        except _LoadTimeout:
            raise RewardError(
                f"{what} did not finish loading (importing its module) within {load_s:.0f} "
                f"s and was stopped; does its import hang? {LOAD_SETTING} sets the time it "
                f"gets to load"
            ) from None
        except subprocess.TimeoutExpired:
            code = None
        finally:  # the group: the child if it still runs, and whatever it forked
            _kill_group(child.pid)
            child.wait()
            with _LIVE_LOCK:
                _LIVE.discard(child.pid)
        if code is None:
            raise RewardError(
                f"{what} did not finish {doing} within {timeout_s:.0f} s and was stopped; "
                f"{slow_hint}"
            )
        answer, err = _read(stdout, ANSWER_CHARS), _read(stderr, STDERR_READ_CHARS)
    try:
        parsed = json.loads(answer.strip().splitlines()[-1])
    except (ValueError, IndexError):
        parsed = None
    if code != 0 or not isinstance(parsed, dict):
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            raise RewardError(redact(parsed["error"]))
        tail = redact(err).strip()[-STDERR_TAIL:] or "no output"  # redacted before the cut
        raise RewardError(
            f"{what}: its process exited with code {code} while {doing} "
            f"(did it call exit() or os._exit()?): {tail}"
        )
    return parsed


class _LoadTimeout(Exception):
    pass


def _wait_loaded(child: subprocess.Popen, loaded: Path, load_s: float) -> int | None:
    """Wait until the child says its user code is loaded (None) or exits (its code); raise
    _LoadTimeout past the load limit."""
    import time

    deadline = time.monotonic() + load_s
    while True:
        try:
            return child.wait(timeout=LOAD_POLL_S)
        except subprocess.TimeoutExpired:
            pass
        if loaded.stat().st_size > 0:
            return None
        if time.monotonic() > deadline:
            raise _LoadTimeout


def _read(f: Any, limit: int) -> str:
    """The last `limit` characters a child wrote to a file (it may have written gigabytes)."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - limit * 4))  # a character is at most 4 bytes in UTF-8
    return f.read().decode("utf-8", errors="replace")[-limit:]


def _main() -> int:
    from posttrain.core.errors import PosttrainError
    from posttrain.rewards.probes import run_probes
    from posttrain.rewards.registry import get_reward

    die_with_parent()
    job = json.loads(sys.stdin.read())
    answer_to = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what the reward prints goes to stderr: it cannot forge the answer line
    _limit_memory()
    op, ref = job.pop("op", "probe"), job.pop("reward")
    try:
        reward = get_reward(ref, job.pop("params", None))
        if op == "inspect":
            reward.function  # noqa: B018  (imports the file: the error names what is wrong)
            answer: dict[str, Any] = {"columns": list(reward.columns)}
        elif op == "score":
            from posttrain.rewards.guards import score_rows

            answer = {"scores": []}
            for completions, rows in job.pop("batches"):
                scores = score_rows(reward, completions, rows)
                answer["scores"].append(
                    {"rewards": scores.rewards, "components": scores.components}
                )
        else:
            answer = run_probes(reward, job.pop("rows"), **job).to_dict()
    except PosttrainError as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": f"reward '{ref}' ran out of memory ({_memory_note()})"}
    except BaseException as exc:  # exit() or Ctrl-C in their code: say so
        doing = {"inspect": "loading", "score": "scoring"}.get(op, "scoring the probe battery")
        answer = {"error": f"reward '{ref}' raised {type(exc).__name__} while {doing}: {exc}"}
    answer_to.write(json.dumps(answer, default=str) + "\n")
    answer_to.flush()
    return 1 if "error" in answer else 0


def _limit_memory() -> None:
    """Cap the child's address space at $POSTTRAIN_REWARD_MEMORY_MB (0: no cap)."""
    import resource

    megabytes = _memory_mb()
    if megabytes > 0:
        limit = megabytes * 2**20
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _memory_mb() -> int:
    try:
        return int(os.environ.get("POSTTRAIN_REWARD_MEMORY_MB") or DEFAULT_MEMORY_MB)
    except ValueError:
        return DEFAULT_MEMORY_MB


def _memory_note() -> str:
    return f"the limit is {_memory_mb()} MB of address space; POSTTRAIN_REWARD_MEMORY_MB sets it"


if __name__ == "__main__":
    sys.exit(_main())
