"""A judge as evaluate's un-optimised metric (`eval.judge`, or evaluate's `judge`).

A rubric the training never saw, asked of a judge, is the honest second opinion on a task
whose reward is a rule: the training reward can be gamed, a judge it never optimised cannot
have been. It scores each answer alone (single mode): group mode ranks answers against each
other, so a base group and a trained group would both come back spread over [0, 1], and
their means could not be compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.rewards.judge.reward import JudgeReward, inline_rubric
from posttrain.rewards.registry import get_reward

METRIC = "eval_judge"


def metric_params(params: Mapping[str, Any], roots: list[Path] | None = None) -> dict[str, Any]:
    """The judge's params as evaluate will use them: its rubric_file read (inside the roots)
    and single mode; built once here, so a bad judge is said before anything runs."""
    if not isinstance(params, Mapping):
        raise ConfigError(
            f"eval.judge must be the params of a judge reward ({{rubric, base_url, model, "
            f"...}}), not {type(params).__name__}"
        )
    if params.get("mode", "single") != "single":
        raise ConfigError(
            "eval.judge: mode must be 'single' (or left out): a group judge scores answers "
            "relative to each other, so base and trained means could not be compared"
        )
    if "gate" in params:
        raise ConfigError("eval.judge: a gate belongs to a training reward; leave it out here")
    checked = {**inline_rubric(params, roots), "mode": "single"}
    metric_judge(checked)
    return checked


def evaluation_judge(given: Mapping[str, Any] | None, spec: Any) -> Mapping[str, Any] | None:
    """The judge an evaluation asks, decided here once: evaluate's own `judge`, else the
    spec's eval.judge (checked when the spec was loaded); None for none."""
    if given is not None:
        return given
    return spec.eval.judge if spec.eval else None


def metric_judge(params: Mapping[str, Any]) -> JudgeReward:
    try:
        judge = get_reward("judge", dict(params))
    except ConfigError as exc:
        raise ConfigError(f"eval.judge: {exc}") from None
    assert isinstance(judge, JudgeReward)
    return judge


def same_judge(metric: JudgeReward, training: Any) -> bool:
    """Whether the metric is the training reward's own judge (same rubric and model): then
    it measures what training optimised, and is no second opinion."""
    return (
        isinstance(training, JudgeReward)
        and training.rubric_text == metric.rubric_text
        and training.model == metric.model
    )
