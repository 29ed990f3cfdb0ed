"""The local supervisor: starts the trainer, waits for it, and records how it ended.

    python -m posttrain.runs.supervisor RUN_DIR

It runs detached in its own session (the run outlives the CLI or server that started it),
so a trainer killed by a signal or the kernel still gets a `result` event with the cause
("killed by SIGKILL", "exited with code 1") instead of leaving a run that never ends.
It writes process.json (its pid, the trainer's pid and exit code); run.json belongs to
the launcher, so the two never race on one file. It holds the trainer to the spec's
compute.timeout_s: at the limit it writes timeout.request and sends SIGTERM (the trainer
stops after its step, saves and fails with "timeout after N s"), and kills it after a grace.
It ignores SIGTERM itself: a cancel is delivered to the trainer, which stops after its step,
and the supervisor stays to write down what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from posttrain.core.priority import lower_priority
from posttrain.core.secrets import redact, secret_values
from posttrain.runs import forkserver
from posttrain.runs.forkserver import ForkedTrainer
from posttrain.runs.layout import (
    CANCEL_REQUEST,
    PROCESS,
    SPEC,
    STDOUT,
    TIMEOUT_REQUEST,
    has_result,
    process_start,
    read_json,
    record_end,
    write_json_atomic,
    write_result,
)
from posttrain.runs.queue import cpu_thread_env, wait_for_slot

TIMEOUT_GRACE_S = 60.0  # the trainer's time to finish its step and save, past its timeout


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if code == -9 else ""
        return f"trainer killed by {name}{hint}"
    return f"trainer exited with code {code}"


def with_last_output(cause: str, run_dir: Path, lines: int = 5) -> str:
    """The cause, followed by the trainer's last output lines when it printed any."""
    try:
        text = (run_dir / STDOUT).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return cause
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return f"{cause}; last output: {' | '.join(tail)[-600:]}" if tail else cause


def copy_output(child: subprocess.Popen | ForkedTrainer, path: Path) -> None:
    """The trainer's output, line by line into stdout.log, with secret values redacted
    (a library may print its environment, a traceback may quote a token)."""
    values = secret_values()
    assert child.stdout is not None
    with path.open("ab") as out:
        for raw in iter(child.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            out.write(redact(line, values).encode())
            out.flush()


def timeout_s(run_dir: Path) -> float:
    """The spec's compute.timeout_s: how long the trainer may run (from its start)."""
    spec = read_json(run_dir / SPEC)
    return float((spec.get("compute") or {}).get("timeout_s") or 3600)


def stop_at_timeout(
    child: subprocess.Popen | ForkedTrainer, run_dir: Path, limit: float
) -> tuple[int, bool]:
    """Ask the trainer to stop at its timeout (it finishes its step, saves final/ and writes
    a failed result with the cause); kill it if it has not stopped within the grace.
    Returns its exit code, and whether it was killed."""
    write_json_atomic(run_dir / TIMEOUT_REQUEST, {"timeout_s": round(limit), "at": time.time()})
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    try:
        return child.wait(timeout=TIMEOUT_GRACE_S), False
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait(), True


def start_trainer(run_dir: Path, env: dict[str, str]) -> subprocess.Popen | ForkedTrainer:
    """`python -m posttrain.gpu.train RUN_DIR`: forked, when this supervisor was forked by
    the fork server (the trainer's libraries are imported already), else a new interpreter."""
    if forkserver.preloaded():
        return forkserver.fork_trainer(run_dir, env)
    return subprocess.Popen(
        [sys.executable, "-m", "posttrain.gpu.train", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        # the trainer takes SIGTERM as "stop after this step"; it must not inherit SIG_IGN
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )


def supervise(run_dir: Path) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lower_priority()  # below the server: its trainer inherits it, forked or started
    me = os.getpid()
    info = {"supervisor_pid": me, "supervisor_start": process_start(me)}
    write_json_atomic(run_dir / PROCESS, info)
    slot = wait_for_slot(run_dir)
    if slot is None:  # cancelled while queued
        write_result(run_dir, "cancelled", "cancelled while queued (it never started)")
        return 0
    child = start_trainer(run_dir, {**os.environ, **cpu_thread_env()})
    info.update(
        trainer_pid=child.pid,
        trainer_start=process_start(child.pid),
        trainer_started_at=time.time(),
    )
    write_json_atomic(run_dir / PROCESS, info)
    reader = threading.Thread(target=copy_output, args=(child, run_dir / STDOUT), daemon=True)
    reader.start()
    limit = timeout_s(run_dir)
    killed = False
    try:
        code = child.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        code, killed = stop_at_timeout(child, run_dir, limit)
    reader.join(timeout=10)
    if not has_result(run_dir) and (run_dir / TIMEOUT_REQUEST).exists():
        if killed:
            how = f"the trainer did not stop within {TIMEOUT_GRACE_S:.0f} s and was killed"
        else:  # it ended when asked to stop, but wrote no result: say how, and its last words
            how = with_last_output(
                f"asked to stop, the {describe_exit(code)} before writing a result", run_dir
            )
        write_result(
            run_dir,
            "failed",
            f"timeout after {limit:.0f} s (compute.timeout_s): {how}",
            exit_code=code,
        )
    if not has_result(run_dir):
        cause = describe_exit(code)
        if code != 0 and not (run_dir / CANCEL_REQUEST).exists():
            cause = with_last_output(cause, run_dir)
        record_end(run_dir, cause, exit_code=code)
    info.update(trainer_exit_code=code, ended_at=time.time())
    write_json_atomic(run_dir / PROCESS, info)
    slot.close()  # frees the slot for the next queued run
    return 0


def main() -> int:
    if len(sys.argv) != 2:
        print(json.dumps({"error": "usage: python -m posttrain.runs.supervisor RUN_DIR"}))
        return 2
    return supervise(Path(sys.argv[1]))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
