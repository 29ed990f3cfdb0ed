"""The detached worker of one job (posttrain.jobs.detached):

    python -m posttrain.jobs.worker JOB_DIR

It runs the job's work, reports progress into JOB_DIR/progress.json and writes
JOB_DIR/result.json once: succeeded with what the tool returns, failed with the error, or
cancelled when SIGTERM (from `cancel_job`) arrives.
"""

from __future__ import annotations

import importlib
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
from posttrain.jobs.detached import JOB, RESULT, report
from posttrain.runs.layout import read_json, write_json_atomic

log = logging.getLogger("posttrain.job")


class Cancelled(BaseException):
    """SIGTERM: the job was cancelled (BaseException: no `except Exception` swallows it)."""


# Each kind's work is a verb's own function, named here and imported when the job runs: the
# job runtime sits below the verbs that start jobs (evaluate, export).
WORK = {
    "evaluate": "posttrain.tools.evaluate:job_work",
    "export": "posttrain.tools.export:job_work",
}


def work_of(kind: str) -> Callable[[dict[str, Any], Callable[..., None]], dict[str, Any]]:
    module, name = WORK[kind].split(":")
    return getattr(importlib.import_module(module), name)


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
        result = work_of(job["kind"])(job, progress)
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
