"""Running a user's reward out of the caller's process, with a time limit.

A reward file is someone's code: it may hang, leak, crash the interpreter or call exit().
The server runs the probe battery on it in a child process (`python -m
posttrain.rewards.isolated`, JSON in and out) and kills it after the time limit, so the
server answers with a clear error and stays up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from posttrain.errors import RewardError

DEFAULT_TIMEOUT_S = 60.0
STDERR_TAIL = 600


def probe_in_subprocess(job: dict[str, Any], timeout_s: float | None = None) -> dict:
    """Run run_probes(**job) in a child process; its report, or RewardError saying why not.
    The limit: `timeout_s`, else $POSTTRAIN_REWARD_TIMEOUT_S, else 60 s."""
    if timeout_s is None:
        timeout_s = float(os.environ.get("POSTTRAIN_REWARD_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    try:
        out = subprocess.run(
            [sys.executable, "-m", "posttrain.rewards.isolated"],
            input=json.dumps(job, default=str),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=os.getcwd(),
        )
    except subprocess.TimeoutExpired:
        raise RewardError(
            f"reward '{job['reward']}' did not finish the probe battery within {timeout_s:.0f} s "
            f"and was stopped; it may hang or be far too slow for training (it runs on every "
            f"sampled completion)"
        ) from None
    if out.returncode != 0:
        try:
            problem = json.loads(out.stdout.strip().splitlines()[-1])["error"]
        except (ValueError, IndexError, KeyError, TypeError):
            tail = out.stderr.strip()[-STDERR_TAIL:] or "no output"
            problem = f"the reward process exited with code {out.returncode}: {tail}"
        raise RewardError(problem)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _main() -> int:
    from posttrain.errors import PosttrainError
    from posttrain.rewards.probes import run_probes
    from posttrain.rewards.registry import get_reward

    job = json.loads(sys.stdin.read())
    try:
        reward = get_reward(job.pop("reward"), job.pop("params", None))
        report = run_probes(reward, job.pop("rows"), **job)
    except PosttrainError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(report.to_dict(), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
