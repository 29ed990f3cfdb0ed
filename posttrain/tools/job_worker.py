"""The detached worker of one job (posttrain.tools.jobs):

    python -m posttrain.tools.job_worker JOB_DIR

It runs the job's work, reports progress into JOB_DIR/progress.json and writes
JOB_DIR/result.json once: succeeded with what the tool returns, failed with the error, or
cancelled when SIGTERM (from `cancel_job`) arrives.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from posttrain.core.errors import PosttrainError
from posttrain.core.priority import lower_priority
from posttrain.core.secrets import redact
from posttrain.runs.layout import read_json, write_json_atomic
from posttrain.tools.jobs import JOB, RESULT, report

log = logging.getLogger("posttrain.job")


class Cancelled(BaseException):
    """SIGTERM: the job was cancelled (BaseException: no `except Exception` swallows it)."""


def _evaluate(job: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
    from posttrain.tools.context import Context
    from posttrain.tools.evaluate import run_evaluation

    args, extra = job["args"], job.get("extra") or {}
    ctx = Context(root=Path(job["runs_root"]))
    outcome = run_evaluation(
        args["run_id"],
        args["k"],
        args["base_passes"],
        args["max_tasks"],
        args["threshold"],
        args["seed"],
        approved_by=extra.get("approved_by") or "free",
        worst_case_usd=extra.get("worst_case_usd") or 0.0,
        ctx=ctx,
        progress=progress,
        judge=args.get("judge"),
    )
    return outcome.model_copy(update={"job_id": job["job_id"]}).model_dump(mode="json")


def _export(job: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
    from posttrain.tools.context import Context
    from posttrain.tools.export import export_run

    args, extra = job["args"], job.get("extra") or {}
    ctx = Context(root=Path(job["runs_root"]))
    progress(0, 1, "exporting")
    roots = [Path(r) for r in extra["roots"]] if extra.get("roots") is not None else None
    result = export_run(
        args["run_id"], args["out"], args["merged"], args["push_to_hub"], ctx=ctx, roots=roots
    )
    return result.model_dump(mode="json")


WORK = {"evaluate": _evaluate, "export": _export}


def main(job_dir: Path) -> int:
    lower_priority()  # an evaluation is CPU work the server must answer beside
    job = read_json(job_dir / JOB)

    def cancelled(signum: int, frame: Any) -> None:
        raise Cancelled

    signal.signal(signal.SIGTERM, cancelled)

    def progress(done: int | None, total: int | None, message: str) -> None:
        report(job_dir, message.split(":")[0][:80], done, total, message)

    end: dict[str, Any]
    try:
        result = WORK[job["kind"]](job, progress)
        end = {"status": "succeeded", "result": result, "message": "done"}
    except Cancelled:
        end = {"status": "cancelled", "message": "cancelled; nothing was stored"}
    except PosttrainError as exc:
        end = {"status": "failed", "error": redact(str(exc)), "message": "failed"}
    except BaseException as exc:  # the job's end must be written, whatever ended it
        log.error("job failed:\n%s", redact(traceback.format_exc()))
        error = f"internal error ({type(exc).__name__}: {exc}); the details are in log.txt"
        end = {"status": "failed", "error": redact(error), "message": "failed"}
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the result is written whole
    write_json_atomic(job_dir / RESULT, {**end, "ended_at": time.time()})
    return 0 if end["status"] == "succeeded" else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    sys.exit(main(Path(sys.argv[1])))
