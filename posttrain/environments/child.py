"""The environment check's isolated child, and the parent's side of it.

`check_in_child` runs `python -m posttrain.environments.child` through the reward child's
machinery (rewards.isolated.run_child: its own process group, killed at the limit, output
to files, an address-space cap). The child writes a progress line per scenario to a file;
when it dies (os._exit, a hang in C code, out of memory), the parent records the scenario
it was in as crashed and starts a fresh child for the rest, so one bad tool never hides
what the other scenarios found.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from posttrain.core.errors import PosttrainError, RewardError
from posttrain.environments.scenarios import SCENARIOS
from posttrain.rewards.isolated import (
    LOAD_SETTING,
    _limit_memory,
    die_with_parent,
    reward_timeout_s,
    run_child,
)


def check_in_child(job: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(meta, episodes): the child's answer and each scenario's episode, crashed or not."""
    b = job["bounds"]
    # every call into user code is bounded (reset, each turn's calls, get_reward); loading it
    # gets the reward limit (POSTTRAIN_REWARD_TIMEOUT_S) on its own, as a reward file does:
    # a hanging import is said within it, not after every scenario's budget
    per_scenario_s = (b["max_turns"] + 3) * b["tool_timeout_s"]
    limit_s = reward_timeout_s() + len(SCENARIOS) * per_scenario_s
    episodes: list[dict[str, Any]] = []
    done: list[str] = []
    meta: dict[str, Any] = {}
    for _attempt in range(len(SCENARIOS) + 1):  # at most one fresh child per scenario
        with tempfile.TemporaryDirectory() as folder:
            progress, loaded = Path(folder) / "progress.jsonl", Path(folder) / "loaded"
            progress.touch()
            loaded.touch()
            try:
                meta = run_child(
                    {**job, "skip": done, "progress": str(progress), "loaded": str(loaded)},
                    limit_s,
                    "playing the scripted episodes",
                    what=f"environment '{job['described']}'",
                    slow_hint="a call hangs where no signal reaches it; "
                    f"{LOAD_SETTING} sets the time it gets to load",
                    module="posttrain.environments.child",
                    loaded=loaded,
                )
                crash = None
            except RewardError as exc:
                crash = str(exc)
            started = None
            for line in progress.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                if "started" in record:
                    started = record["started"]
                else:
                    episodes.append(record)
                    done.append(record["episode"])
                    started = None
        if crash is None:
            return meta, episodes
        if started is None:  # before any scenario: the environment cannot even load
            raise RewardError(crash)
        episodes.append({"episode": started, "crashed": crash, "rewards": {}})
        done.append(started)
    raise RewardError(f"environment '{job['described']}' crashed the check again and again")


def _main() -> int:
    from posttrain.environments.episode import Bounds
    from posttrain.environments.loader import load
    from posttrain.environments.scenarios import run_scenarios

    die_with_parent()
    job = json.loads(sys.stdin.read())
    answer_to = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what user code prints goes to stderr: it cannot forge the answer line
    _limit_memory()
    progress = open(job["progress"], "a", encoding="utf-8")  # noqa: SIM115

    def report(record: dict[str, Any]) -> None:
        progress.write(json.dumps(record, default=str) + "\n")
        progress.flush()

    score = None
    if job.get("reward"):
        score = _scorer(job["reward"], job.get("reward_params") or {})
    try:
        loaded = load(job.get("name"), job.get("tools"))
        if job.get("loaded"):  # the parent's load limit ends here
            Path(job["loaded"]).write_text("loaded", encoding="utf-8")
        answer = run_scenarios(
            loaded,
            job.get("rows") or [],
            Bounds(**job["bounds"]),
            job.get("demo_column"),
            [s.name for s in SCENARIOS if s.name not in job.get("skip", [])],
            score,
            report,
        )
    except PosttrainError as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": "the environment ran out of memory (POSTTRAIN_REWARD_MEMORY_MB)"}
    except BaseException as exc:  # exit() in their code at import: say so
        answer = {"error": f"the environment raised {type(exc).__name__} while loading: {exc}"}
    answer_to.write(json.dumps(answer, default=str) + "\n")
    answer_to.flush()
    return 1 if "error" in answer else 0


def _scorer(ref: str, params: dict[str, Any]) -> Any:
    """The spec's reward on an episode: its completion as TRL passes it (the assistant and
    tool messages after the prompt), one component per reward component."""
    from posttrain.rewards.guards import score_rows
    from posttrain.rewards.registry import get_reward

    reward = get_reward(ref, params)

    def score(episode: Any, row: dict[str, Any]) -> dict[str, float]:
        completion: list[dict[str, Any]] = []
        for turn in episode.turns:
            completion.append({"role": "assistant", "content": turn.assistant})
            completion += [
                {"role": "tool", "name": c.name, "content": c.result} for c in turn.calls
            ]
        shaped = {"prompt": row.get("prompt", ""), **row}
        try:
            scores = score_rows(reward, [completion], [shaped])
        except PosttrainError as exc:
            episode.problems.append(f"reward '{ref}' failed: {exc}")
            return {}
        parts = {f"{ref}:{k}": float(v[0]) for k, v in scores.components.items()}
        value = scores.rewards[0]
        return {ref: float(value)} if value is not None else parts

    return score


if __name__ == "__main__":
    sys.exit(_main())
