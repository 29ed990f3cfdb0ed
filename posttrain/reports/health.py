"""Health warnings read from a run's metrics and traces: what a careful engineer looks for.

Each rule returns a sentence that says what was seen, with its numbers, and what to do.
Beside them: the summaries get_run shows of a run's evaluation and of its dry run.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from posttrain.rewards.text import end_word, verse_lines
from posttrain.runs.run_row import RunRow

WINDOW = 10
JUMP_STEPS = 20  # a rise from low to near the maximum within this many steps is a jump
ZERO_STD_SHARE = 0.5
EARLY_STEPS, EARLY_KL = 5, 1.0  # KL past 1 nat within the first 5 training steps
END_WORD_SHARE = 0.4  # one word ending this share of lines
RHYME_SHARE = 0.5  # one rhyme tail ending this share of lines
HELDOUT_RISE = 0.1  # a training-reward rise worth comparing, as a share of the reward's range


def _mean(values: list[float]) -> float | None:
    clean = [v for v in values if isinstance(v, int | float)]
    return statistics.fmean(clean) if clean else None


def reward_jump(metrics: list[dict[str, Any]], top: float | None) -> str | None:
    rewards = [m.get("reward") for m in metrics]
    if top is None or top == float("inf") or len(rewards) < 2:
        return None
    for i, r in enumerate(rewards):
        if not isinstance(r, int | float) or r < 0.9 * top:
            continue
        before = [x for x in rewards[max(0, i - JUMP_STEPS) : i] if isinstance(x, int | float)]
        if before and min(before) < 0.3 * top:
            return (
                f"reward jumped to its maximum: {min(before):.2f} -> {r:.2f} (max {top:g}) "
                f"within {JUMP_STEPS} steps by step {metrics[i]['step']}; treat it as reward "
                f"hacking until traces prove otherwise (sample_traces order=best)"
            )
    return None


def length_shift(metrics: list[dict[str, Any]], max_len: int | None) -> str | None:
    lengths = [m.get("completion_length") for m in metrics]
    if len(lengths) < 2 * WINDOW:
        return None
    first, last = _mean(lengths[:WINDOW]), _mean(lengths[-WINDOW:])
    if not first or last is None:
        return None
    if last < 0.5 * first:
        return (
            f"completion length collapsed: {first:.0f} -> {last:.0f} tokens over the run; "
            f"short answers may be gaming the reward (read the latest traces)"
        )
    if last > 2 * first or (max_len and last >= 0.95 * max_len):
        return (
            f"completion length exploded: {first:.0f} -> {last:.0f} tokens"
            f"{f' (limit {max_len})' if max_len else ''}; answers may be padding or never "
            f"ending"
        )
    return None


def early_kl_leap(metrics: list[dict[str, Any]]) -> str | None:
    """The policy left its start within its first steps (KL to the reference past
    EARLY_KL): measured on the demo at lr 1e-3 with no warmup, KL 2.9-5.8 by step 4 on three
    seeds, one of which never learned; 0.09 at most with a 25-step warmup (docs/demo.md)."""
    early = [m for m in metrics if m.get("phase", "train") == "train"][:EARLY_STEPS]
    leaps = [m for m in early if isinstance(m.get("kl"), int | float) and m["kl"] > EARLY_KL]
    if not leaps:
        return None
    top = max(leaps, key=lambda m: m["kl"])
    rate = top.get("learning_rate")
    at_rate = f" at learning rate {rate:.3g}" if isinstance(rate, int | float) else ""
    return (
        f"the policy left its start at once: KL to the reference {top['kl']:.2f} by step "
        f"{top['step']}{at_rate}; Adam's first steps move every weight by about the rate, "
        f"so set algorithm.warmup_steps (a tenth of the steps) or lower algorithm.learning_rate"
    )


def zero_variance(metrics: list[dict[str, Any]]) -> str | None:
    share = _mean([m.get("frac_zero_std") for m in metrics[-WINDOW:]])
    if share is not None and share > ZERO_STD_SHARE:
        return (
            f"{share:.0%} of reward groups had zero variance over the last {WINDOW} steps: "
            f"every sample of a prompt scored alike, so GRPO learns nothing from them "
            f"(raise temperature or num_generations, or make the reward finer)"
        )
    return None


def repeated_end_words(completions: list[str]) -> str | None:
    ends = [
        w for text in completions for line in verse_lines(text) if (w := end_word(line)) is not None
    ]
    if len(ends) < 8:
        return None
    word, count = Counter(ends).most_common(1)[0]
    if count / len(ends) >= END_WORD_SHARE:
        return (
            f"end words repeat across samples: '{word}' ends {count} of {len(ends)} lines in "
            f"the latest traces; the policy may be collapsing onto one rhyme"
        )
    from posttrain.rewards.phonetics import rhyme_table

    table = rhyme_table()
    tails: dict[str, list[str]] = {}
    for w in ends:
        tails.setdefault(table.tail_text(table.lookup(w)[0][0]), []).append(w)
    tail, words = max(tails.items(), key=lambda kv: len(kv[1]))
    if len(words) / len(ends) >= RHYME_SHARE:
        examples = ", ".join(dict.fromkeys(words))
        return (
            f"end words collapse onto one rhyme: tail '{tail}' ({examples}) ends "
            f"{len(words)} of {len(ends)} lines in the latest traces; diversity is falling"
        )
    return None


def heldout_stalls(
    metrics: list[dict[str, Any]], heldout: list[dict[str, Any]], span: float | None
) -> str | None:
    """The training reward rose (by HELDOUT_RISE of the reward's range) while the held-out
    reward gained less than a quarter of that: learning that does not carry over."""
    rewards = [m.get("reward") for m in metrics]
    points = [p for p in heldout if isinstance(p.get("reward"), int | float)]
    if len(points) < 3 or len(rewards) < 2 * WINDOW:
        return None
    first, last = _mean(rewards[:WINDOW]), _mean(rewards[-WINDOW:])
    if first is None or last is None:
        return None
    rise = last - first
    held = points[-1]["reward"] - points[0]["reward"]
    if rise >= HELDOUT_RISE * (span or 1.0) and held < 0.25 * rise:
        return (
            f"the training reward rose {first:.2f} -> {last:.2f} while the held-out reward did "
            f"not ({points[0]['reward']:.2f} at step {points[0]['step']} -> "
            f"{points[-1]['reward']:.2f} at step {points[-1]['step']}, {points[-1].get('n')} "
            f"prompts): the model may be memorising its training prompts or gaming them; read "
            f"sample_traces and evaluate before scaling up"
        )
    return None


CHOSEN_FALL_NATS = 1.0  # a fall of the chosen answers' summed log-likelihood worth a warning


def chosen_likelihood_falls(metrics: list[dict[str, Any]]) -> str | None:
    """DPO's known failure: the margin grows because both answers get less likely, the
    rejected faster; the chosen answers, what the raters preferred, lose probability too."""
    steps = [m for m in metrics if isinstance(m.get("logp_chosen"), int | float)]
    if len(steps) < 2 * WINDOW:
        return None
    first, last = steps[:WINDOW], steps[-WINDOW:]
    chosen = _mean([m["logp_chosen"] for m in first]), _mean([m["logp_chosen"] for m in last])
    margin = _mean([m.get("margin") for m in first]), _mean([m.get("margin") for m in last])
    if None in chosen or None in margin:
        return None
    fell = chosen[0] - chosen[1]  # type: ignore[operator]
    if fell >= CHOSEN_FALL_NATS and margin[1] > margin[0]:  # type: ignore[operator]
        return (
            f"the chosen answers got less likely while the margin grew: log-likelihood "
            f"{chosen[0]:.1f} -> {chosen[1]:.1f}, margin {margin[0]:.2f} -> {margin[1]:.2f} "
            f"(steps {steps[0]['step']}-{steps[-1]['step']}); DPO is pushing both answers "
            f"down, the rejected faster, and the model drifts from what was preferred. Lower "
            f"algorithm.learning_rate, raise algorithm.dpo.beta, or use loss_type 'apo_zero' "
            f"(it raises the chosen likelihood), and read the traces"
        )
    return None


PREFERENCE_METRICS = ("margin", "preference_accuracy", "logp_chosen", "logp_rejected")


def preference_summary(metrics: list[dict[str, Any]]) -> dict[str, Any] | None:
    """DPO's training-batch figures, first and last WINDOW steps' means; None for other runs."""
    steps = [m for m in metrics if isinstance(m.get("margin"), int | float)]
    if not steps:
        return None
    out: dict[str, Any] = {"steps": [steps[0]["step"], steps[-1]["step"]], "window": WINDOW}
    for name in PREFERENCE_METRICS:
        first = _mean([m.get(name) for m in steps[:WINDOW]])
        last = _mean([m.get(name) for m in steps[-WINDOW:]])
        out[name] = {
            "first": None if first is None else round(first, 4),
            "last": None if last is None else round(last, 4),
        }
    return out


def warnings(
    metrics: list[dict[str, Any]],
    latest_completions: list[str],
    reward_top: float | None,
    max_completion_length: int | None,
    heldout: list[dict[str, Any]] | None = None,
    reward_span: float | None = None,
) -> list[str]:
    found = [
        reward_jump(metrics, reward_top),
        length_shift(metrics, max_completion_length),
        zero_variance(metrics),
        early_kl_leap(metrics),
        repeated_end_words(latest_completions),
        heldout_stalls(metrics, heldout or [], reward_span),
        chosen_likelihood_falls(metrics),
    ]
    return [w for w in found if w]


def evaluation_list(run_dir: Path) -> list[dict[str, Any]]:
    """Every evaluation kept with the run, oldest first: path, time, verdict, tasks used."""
    from posttrain.evals.history import listed

    return listed(run_dir)


def evaluation_summary(run_dir: Path) -> dict[str, Any] | None:
    from posttrain.evals.history import latest

    found = latest(run_dir)
    if found is None:
        return None
    reward = next((m for m in found["metrics"] if m.get("is_training_reward")), found["metrics"][0])
    return {
        "verdict": found["verdict"],
        "tasks_used": found["tasks_used"],
        "created_at": found["created_at"],
        "path": found.get("path"),
        "metric": reward["name"],  # the headline: the reward, or what its kind is judged by
        "reward_base": reward["base_mean"],
        "reward_trained": reward["trained_mean"],
        "ci": [reward["ci_low"], reward["ci_high"]],
    }


def dry_run_summary(row: RunRow, spec: dict[str, Any]) -> dict[str, Any] | None:
    """What a dry run proved (from its `dry_run` event), or that one is under way."""
    if not (spec.get("model") or {}).get("stand_in"):
        return None
    from posttrain.gpu.dryrun import CANNOT_PROVE

    found = json.loads(row.dry_run) if row.dry_run else {}
    return {
        "rewards": "not meaningful: the stand-in has random weights, so reward health "
        "checks are skipped for this run",
        **({"proved": [], "cannot_prove": CANNOT_PROVE} if not found else {}),
        **found,
        "complete": bool(found),
        # complete, under way, or how the run ended without completing it (failed, cancelled)
        "state": "complete" if found else (row.status if row.is_final else "under way"),
    }


def run_health(
    ctx: Any,
    row: RunRow,
    metrics: list[dict[str, Any]],
    spec: dict[str, Any],
    heldout: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The warnings get_run shows for a run (none for a dry run: its rewards are noise)."""
    from posttrain.rewards.registry import get_reward

    if (spec.get("model") or {}).get("stand_in"):
        return []  # random weights: rewards mean nothing, so nothing to warn about
    reward = spec.get("reward") or {}
    try:
        low, top = get_reward(reward.get("name", ""), reward.get("params") or {}).value_range
    except Exception:  # a reward that no longer loads still has metrics worth checking
        low, top = None, None
    span = top - low if low is not None and top is not None and math.isfinite(top - low) else None
    steps = ctx.index.trace_steps(row.run_id)
    latest = ctx.index.traces(row.run_id, steps[-1:]) if steps else []
    return warnings(
        metrics,
        [t["completion"] or "" for t in latest],
        top,
        (spec.get("algorithm") or {}).get("max_completion_length"),
        heldout,
        span,
    )
