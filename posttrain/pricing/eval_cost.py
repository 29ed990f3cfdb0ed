"""An evaluation's price, told once: each run's container on its GPU for the whole window
(a run's base and trained passes are one call), and a paid judge's share. Read by the
question, the approval and the ledger through the plan (posttrain.spec.eval_plan)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posttrain.models.container import container_for_model, worst_case_s
from posttrain.rewards.judge.metric import metric_judge
from posttrain.rewards.judge.price import JudgeCost, evaluation_cost
from posttrain.runs.layout import HOLDOUT, SPEC, read_json
from posttrain.spec.eval_plan import EvalCost, EvalRun
from posttrain.spec.schema import load_spec

EVAL_TIMEOUT_S = 3600  # the worst case an evaluation on Modal is approved for, per run


def eval_cost(
    runs: list[EvalRun],
    judge: Mapping[str, Any] | None,
    k: int,
    base_passes: int,
    max_tasks: int,
) -> EvalCost:
    """The price of evaluating these runs with this judge (the plan's, already resolved)."""
    gpu_usd = 0.0
    for run in runs:
        if run.gpu is None:  # this machine: free
            continue
        model = (read_json(run.path / SPEC).get("model") or {}).get("name") or ""
        container = container_for_model(run.gpu, 1, model)  # its GPU, CPU cores and memory
        gpu_usd += worst_case_s(EVAL_TIMEOUT_S) * container.usd_per_s
    share = judge_share(runs, judge, k, base_passes, max_tasks)
    worst = round(gpu_usd + (share.worst_case_usd if share else 0.0), 2)
    on_gpu = any(run.gpu for run in runs)
    return EvalCost(
        gpu=", ".join(dict.fromkeys(run.gpu for run in runs if run.gpu)) or None,
        timeout_s=EVAL_TIMEOUT_S,
        gpu_worst_case_usd=round(gpu_usd, 2),
        judge=share.to_dict() if share else None,
        worst_case_usd=worst,
        expected_usd=None if on_gpu else (share.expected_usd if share else 0.0),
    )


def judge_share(
    runs: list[EvalRun],
    judge: Mapping[str, Any] | None,
    k: int,
    base_passes: int,
    max_tasks: int,
) -> JudgeCost | None:
    """A paid judge's share of the evaluation, at most: every sample of every pass asked
    alone; None for no judge or a free one."""
    if not judge or not runs:
        return None
    spec = load_spec(runs[0].path / SPEC)
    if spec.environment is not None:  # episodes are not judged (not built)
        return None
    reward = metric_judge(judge)
    if reward.free:
        return None
    try:
        held_out = sum(1 for line in (runs[0].path / HOLDOUT).open(encoding="utf-8") if line)
    except OSError:
        held_out = max_tasks
    answers = min(max_tasks, held_out) * k * (base_passes + 1) * len(runs)
    a = spec.algorithm
    return evaluation_cost(reward, answers, a.max_prompt_length, a.max_completion_length)


def judge_words(share: Mapping[str, Any]) -> str:
    """A judge's share, in the words of the question to the human."""
    return (
        f"ask the judge {share['model']} at {share['endpoint']} up to {share['calls']:,} times "
        f"(~{share['tokens_in'] / 1e6:.1f}M tokens in; up to ${share['worst_case_usd']:.2f}, "
        f"{share['price_source']})"
    )
