"""Jobs: work longer than a tool call may last (an evaluation, an export), run detached.

A job is a folder `$POSTTRAIN_HOME/jobs/<job_id>/`:
  job.json       what to do (kind, arguments, key), the runs folder, when it was asked for
  process.json   the worker's pid and start time (to tell it from a recycled pid)
  progress.json  stage, done of total and a message, rewritten as the work goes
  result.json    how it ended: succeeded with a result, failed with an error, or cancelled
  cancel.request written by `cancel_job`, beside a SIGTERM to the worker's process group
  log.txt        the worker's own output

`start_job` returns at once: the work runs in `python -m posttrain.jobs.worker JOB_DIR`,
in a session of its own, so it outlives the server or the CLI that started it. The same
request twice (the same kind and arguments) is the same job while that job runs or after it
succeeded; one that failed or was cancelled is started afresh. A worker that died without a
result (killed, the machine restarted) reads as failed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.core.paths import home
from posttrain.runs import forkserver
from posttrain.runs.layout import process_alive, process_start, read_json, write_json_atomic

JobKind = Literal["evaluate", "export"]
JobStatus = Literal["running", "succeeded", "failed", "cancelled"]
JOB_ID_PREFIX = "job-"
JOB, PROCESS, PROGRESS, RESULT, CANCEL, LOG = (
    "job.json",
    "process.json",
    "progress.json",
    "result.json",
    "cancel.request",
    "log.txt",
)


class JobView(BaseModel):
    job_id: str
    kind: JobKind
    status: JobStatus
    run_id: str | None = Field(None, description="The run (or group) the job works on.")
    stage: str | None = Field(None, description="What it is doing now, e.g. 'base pass 2/3'.")
    done: int | None = None
    total: int | None = None
    message: str = ""
    created_at: float
    updated_at: float | None = Field(None, description="When progress was last reported.")
    ended_at: float | None = None
    result: dict[str, Any] | None = Field(
        None, description="Once succeeded: what the tool would have returned (e.g. evaluate's)."
    )
    error: str | None = Field(None, description="Once failed: why.")
    args: dict[str, Any] = Field(default_factory=dict)


def jobs_root() -> Path:
    return home() / "jobs"


def job_key(kind: str, args: dict[str, Any]) -> str:
    """One request, one key: the kind and its arguments, canonically."""
    canonical = json.dumps([kind, args], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One starter at a time on this machine: two same requests racing start one job."""
    root = jobs_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_job(kind: JobKind, args: dict[str, Any]) -> JobView | None:
    """The job this request already is: running, or succeeded; None otherwise."""
    key_file = jobs_root() / "by-key" / job_key(kind, args)
    try:
        job_id = key_file.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not (jobs_root() / job_id / JOB).is_file():
        return None
    view = get_job(job_id)
    return view if view.status in ("running", "succeeded") else None


def start_job(
    kind: JobKind, args: dict[str, Any], runs_root: Path, extra: dict[str, Any] | None = None
) -> JobView:
    """Start the work detached and return at once; the same request returns its job.
    `extra`: what the worker needs that does not make the request another (who approved)."""
    with _locked():
        if found := find_job(kind, args):
            return found
        job_id = time.strftime(f"{JOB_ID_PREFIX}%y%m%d-%H%M%S-", time.gmtime())
        job_id += secrets.token_hex(3)
        job_dir = jobs_root() / job_id
        job_dir.mkdir(parents=True)
        key = job_key(kind, args)
        write_json_atomic(
            job_dir / JOB,
            {
                "job_id": job_id,
                "kind": kind,
                "args": args,
                "extra": extra or {},
                "key": key,
                "runs_root": str(runs_root),
                "created_at": time.time(),
            },
        )
        (jobs_root() / "by-key").mkdir(exist_ok=True)
        (jobs_root() / "by-key" / key).write_text(job_id, encoding="utf-8")
        _spawn(job_dir)
    return get_job(job_id)


def _spawn(job_dir: Path) -> None:
    env = {**os.environ, "POSTTRAIN_HOME": str(home())}
    # Forked by the fork server when one runs (it holds torch and transformers already).
    if pid := forkserver.spawn("posttrain.jobs.worker", [str(job_dir)], job_dir / LOG, env):
        write_json_atomic(job_dir / PROCESS, {"pid": pid, "start": process_start(pid)})
        return
    with open(job_dir / LOG, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "posttrain.jobs.worker", str(job_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a server's exit or ^C does not end it
            env=env,
        )
    write_json_atomic(job_dir / PROCESS, {"pid": child.pid, "start": process_start(child.pid)})
    # Reap it when it ends, so a long-lived server collects no zombies (the job does not
    # depend on this thread: it outlives the process that started it).
    threading.Thread(target=child.wait, daemon=True, name=f"reap {job_dir.name}").start()


def _job_dir(job_id: str) -> Path:
    if not job_id.startswith(JOB_ID_PREFIX) or "/" in job_id or ".." in job_id:
        raise ConfigError(f"job_id '{job_id[:80]}' is not a job id (job-...)")
    job_dir = jobs_root() / job_id
    if not (job_dir / JOB).is_file():
        raise NotFoundError(f"no job '{job_id}' in {jobs_root()}")
    return job_dir


def get_job(job_id: str) -> JobView:
    """A job's stage, progress and, once it ended, its result or error."""
    job_dir = _job_dir(job_id)
    job, progress, result = (read_json(job_dir / n) for n in (JOB, PROGRESS, RESULT))
    process = read_json(job_dir / PROCESS)
    if not result and process and not process_alive(process.get("pid"), process.get("start")):
        result = read_json(job_dir / RESULT)  # it may have written its result just now
        if not result:
            died = "the job's worker died without a result (killed, or the machine restarted)"
            cancelled = (job_dir / CANCEL).is_file()
            result = {"status": "cancelled"} if cancelled else {"status": "failed", "error": died}
    status: JobStatus = result.get("status") or "running"
    error = result.get("error")
    args = job.get("args") or {}
    stage, done, total = progress.get("stage"), progress.get("done"), progress.get("total")
    if status == "succeeded":  # every stage done, not the last one begun
        stage, done = "done", total
    return JobView(
        job_id=job_id,
        kind=job["kind"],
        status=status,
        run_id=args.get("run_id"),
        stage=stage,
        done=done,
        total=total,
        message=result.get("message") or progress.get("message") or _waiting(status, job_id),
        created_at=job["created_at"],
        updated_at=progress.get("t"),
        ended_at=result.get("ended_at"),
        result=result.get("result"),
        error=error,
        args=args,
    )


def _waiting(status: JobStatus, job_id: str) -> str:
    if status == "running":
        return f"running; poll get_job('{job_id}')"
    return status


def cancel_job(job_id: str) -> JobView:
    """Ask the job to stop: its worker ends its work and records `cancelled`."""
    job_dir = _job_dir(job_id)
    view = get_job(job_id)
    if view.status != "running":
        return view
    (job_dir / CANCEL).write_text(str(time.time()), encoding="utf-8")
    process = read_json(job_dir / PROCESS)
    pid = process.get("pid")
    if pid and process_alive(pid, process.get("start")):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    return get_job(job_id)


def report(job_dir: Path, stage: str, done: int | None, total: int | None, message: str) -> None:
    """The worker's progress, for get_job."""
    write_json_atomic(
        job_dir / PROGRESS,
        {"stage": stage, "done": done, "total": total, "message": message, "t": time.time()},
    )
