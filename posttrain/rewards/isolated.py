"""Running a user's reward out of the caller's process, with a time limit.

A reward file is someone's code: it may hang, leak, crash the interpreter or call exit().
The server and the CLI never import it: they read its columns (`inspect_reward`) and run the
probe battery on it (`probe_in_subprocess`) in a child process (`python -m
posttrain.rewards.isolated`, JSON in and out) and kill it after the time limit, so they
answer with a clear error and stay up. Only the trainer, itself a child, imports it.
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

    from posttrain.paths import expand
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
    return _run({"op": "probe", **job}, timeout_s, "the probe battery")


def _run(job: dict[str, Any], timeout_s: float | None, doing: str) -> dict:
    """One job in a child process, killed at the limit; its JSON answer or RewardError."""
    if timeout_s is None:
        timeout_s = reward_timeout_s()
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
            f"reward '{job['reward']}' did not finish {doing} within {timeout_s:.0f} s and was "
            f"stopped; it may hang (at import?) or be far too slow for training (it runs on "
            f"every sampled completion); POSTTRAIN_REWARD_TIMEOUT_S sets the limit"
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
    op = job.pop("op", "probe")
    try:
        reward = get_reward(job.pop("reward"), job.pop("params", None))
        if op == "inspect":
            reward.function  # noqa: B018  (imports the file: the error names what is wrong)
            answer: dict[str, Any] = {"columns": list(reward.columns)}
        else:
            answer = run_probes(reward, job.pop("rows"), **job).to_dict()
    except PosttrainError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(answer, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
