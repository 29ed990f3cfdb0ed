"""The local supervisor: starts the trainer, waits for it, and records how it ended.

    python -m posttrain.runs.supervisor RUN_DIR

It runs detached in its own session (the run outlives the CLI or server that started it),
so a trainer killed by a signal or the kernel still gets a `result` event with the cause
("killed by SIGKILL", "exited with code 1") instead of leaving a run that never ends.
It writes process.json (its pid, the trainer's pid and exit code); run.json belongs to
the launcher, so the two never race on one file. It ignores SIGTERM itself: a cancel is
delivered to the trainer, which stops after its step,
and the supervisor stays to write down what happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from posttrain.runs.layout import (
    CANCEL_REQUEST,
    PROCESS,
    STDOUT,
    has_result,
    process_start,
    record_end,
    write_json_atomic,
    write_result,
)
from posttrain.runs.queue import cpu_thread_env, wait_for_slot
from posttrain.secrets import redact, secret_values


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if code == -9 else ""
        return f"trainer killed by {name}{hint}"
    return f"trainer exited with code {code}"


def last_output(run_dir: Path, lines: int = 5) -> str:
    try:
        text = (run_dir / STDOUT).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail)[-600:]


def copy_output(child: subprocess.Popen, path: Path) -> None:
    """The trainer's output, line by line into stdout.log, with secret values redacted
    (a library may print its environment, a traceback may quote a token)."""
    values = secret_values()
    assert child.stdout is not None
    with path.open("ab") as out:
        for raw in iter(child.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            out.write(redact(line, values).encode())
            out.flush()


def supervise(run_dir: Path) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = os.getpid()
    info = {"supervisor_pid": me, "supervisor_start": process_start(me)}
    write_json_atomic(run_dir / PROCESS, info)
    slot = wait_for_slot(run_dir)
    if slot is None:  # cancelled while queued
        write_result(run_dir, "cancelled", "cancelled while queued (it never started)")
        return 0
    env = {**os.environ, **cpu_thread_env()}
    child = subprocess.Popen(
        [sys.executable, "-m", "posttrain.gpu.train", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        # the trainer takes SIGTERM as "stop after this step"; it must not inherit SIG_IGN
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )
    info.update(
        trainer_pid=child.pid,
        trainer_start=process_start(child.pid),
        trainer_started_at=time.time(),
    )
    write_json_atomic(run_dir / PROCESS, info)
    copy_output(child, run_dir / STDOUT)
    code = child.wait()
    if not has_result(run_dir):
        cause = describe_exit(code)
        if code != 0 and not (run_dir / CANCEL_REQUEST).exists():
            context = last_output(run_dir)
            cause += f"; last output: {context}" if context else ""
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
