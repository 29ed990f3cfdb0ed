"""An experiment's evaluation across arms: one base, generated once, and each arm's headline.

`ArmPasses` wraps each arm's generators (evaluate's `job -> answer`, posttrain.runs.backend).
The first job that asks for base passes runs them; a later arm's job that asks for the same
base passes of the same base model (the same job but its trained seed: prompts, samples,
lengths, temperature, template; no warm start of its own) runs its trained pass alone and
gets the first arm's base passes, which are the same numbers it would have drawn (one model,
one seed). The answers are kept, so an arm's deterministic headline (reference_nll,
preference_accuracy, feedback_loglik: measured per task, outside the reward's passes) can be
ranked per task too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from posttrain.evals.kto_metrics import signed

Generate = Callable[[dict[str, Any]], dict[str, Any]]
# job fields that do not change the base passes: the trained pass's seed, the base seeds (the
# cache is for those asked), and what is measured beside sampling
NOT_BASE = ("trained_seed", "references", "pairs", "feedback")


class ArmPasses:
    def __init__(self) -> None:
        self.base: list[Any] | None = None
        self.key: str | None = None
        self.shared_with: list[str] = []  # the arms that took the first arm's base passes
        self.answers: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}

    def wrap(self, arm: str, generate: Generate, base_model: str | None) -> Generate:
        """`generate` for `arm`, sharing base passes when `base_model` (its identity: the
        model and what it resumes from; None when the arm has a base of its own) matches."""

        def run(job: dict[str, Any]) -> dict[str, Any]:
            key = _key(job, base_model)
            if key is not None and self.base is not None and key == self.key:
                answer = {**generate({**job, "base_seeds": []}), "base": self.base}
                if arm not in self.shared_with:
                    self.shared_with.append(arm)
            else:
                answer = generate(job)
                if key is not None and self.base is None and job.get("base_seeds"):
                    self.base, self.key = answer["base"], key
            self.answers.setdefault(arm, []).append((job, answer))
            return answer

        return run

    def headline(self, arm: str, metric: str) -> list[list[float]] | None:
        """[seed][task] trained values of a deterministic headline metric for `arm`, from its
        answers; None when it was not measured on every task."""
        rows = []
        for job, answer in self.answers.get(arm, []):
            values = _trained(metric, job, answer)
            if values is None or any(v is None for v in values):
                return None
            rows.append([float(v) for v in values])
        return rows or None


def _trained(metric: str, job: dict[str, Any], answer: dict[str, Any]) -> list[Any] | None:
    if metric == "reference_nll" and answer.get("nll"):
        return answer["nll"]["trained"]
    if metric == "preference_accuracy" and answer.get("margins"):
        return [float(m > 0) for m in answer["margins"]["trained"]]
    if metric == "feedback_loglik" and answer.get("logliks") and job.get("feedback"):
        labels = [bool(row["label"]) for row in job["feedback"]]
        return signed(answer["logliks"]["trained"], labels)
    return None


def _key(job: dict[str, Any], base_model: str | None) -> str | None:
    if base_model is None or not job.get("base_seeds"):
        return None
    same = {k: v for k, v in job.items() if k not in NOT_BASE}
    return json.dumps({"model": base_model, **same}, sort_keys=True, default=str)
