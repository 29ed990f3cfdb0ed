"""What the scripted episodes say about an environment: flags (bugs to fix before training)
and notes (facts to know). Pure: episodes in, sentences out."""

from __future__ import annotations

from typing import Any

from posttrain.environments.scenarios import WELL_TYPED

HALF = 0.5  # of the span of rewards seen: paying a failed episode more is a shortcut


def total(episode: dict[str, Any]) -> float | None:
    """The episode's reward as TRL sums its sources (weight 1 each); None without one."""
    values = list(episode.get("rewards", {}).values())
    return float(sum(values)) if values else None


def verdicts(
    episodes: list[dict[str, Any]], meta: dict[str, Any], max_result_chars: int
) -> tuple[list[str], list[str]]:
    flagged: list[str] = list(meta.get("problems", []))
    notes: list[str] = []
    for ep in episodes:
        name = ep["episode"]
        if ep.get("crashed"):
            flagged.append(f"{name}: {ep['crashed']}")
            continue
        flagged += [f"{name}: {p}" for p in ep.get("problems", [])]
        for turn in ep.get("turns", []):
            for call in turn.get("calls", []):
                error = call.get("error") or ""
                if "did not return within" in error:
                    flagged.append(f"{name}: tool '{call['name']}' {error}: it hangs")
                elif error and name in WELL_TYPED:
                    flagged.append(
                        f"{name}: tool '{call['name']}' raised on a well-typed call ({error}); "
                        f"return a message the model can act on instead of raising"
                    )
                if call.get("cut"):
                    notes.append(
                        f"{name}: tool '{call['name']}' returned {call['result_chars']:,} "
                        f"characters; the model sees the first {max_result_chars:,}"
                    )
        if ep.get("stopped_at_turn_bound") and name == "demo":
            flagged.append(
                "demo: the demonstration needs more tool-calling turns than max_turns allows; "
                "raise environment.max_turns, or no policy can finish the task"
            )
        elif ep.get("stopped_at_turn_bound"):
            notes.append(f"{name}: the episode stopped at the turn bound, as it should")
    flagged += _reward_flags(episodes, meta)
    if not meta.get("demo_calls"):
        notes.append(
            "no demonstration played: name demo_column (a column holding the calls of a "
            "successful episode for its row) so the check can show the reward pays success"
        )
    return list(dict.fromkeys(flagged)), list(dict.fromkeys(notes))


def _reward_flags(episodes: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    scored = [(ep, total(ep)) for ep in episodes if not ep.get("crashed")]
    scored = [(ep, t) for ep, t in scored if t is not None]
    if not scored:
        return [
            "no episode was scored: define get_reward() on the environment or name a reward "
            "in the spec"
        ]
    low, high = min(t for _, t in scored), max(t for _, t in scored)
    flags = []
    if high == low:
        flags.append(
            f"the reward never varies: every episode scored {low:g}; a constant reward "
            f"teaches nothing (does get_reward read the state the tools change?)"
        )
    demo = next((t for ep, t in scored if ep["episode"] == "demo"), None)
    bar = low + HALF * (high - low)
    for ep, t in scored:
        no_call = ep.get("successful_calls", 0) == 0
        if no_call and ((high > low and t > bar) or (demo is not None and t >= demo)):
            flags.append(
                f"{ep['episode']}: the reward pays {t:g} for an episode without a successful "
                f"tool call (rewards seen: {low:g}..{high:g}"
                + (f", the demonstration: {demo:g}" if demo is not None else "")
                + "); a policy will learn to skip the tools"
            )
    return flags
