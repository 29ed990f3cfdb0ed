"""Before anything starts: the data exists and has every column the spec and its reward read.

A user's reward is their code: its columns are read in the isolated child with a time limit,
never by importing it here.
"""

from __future__ import annotations

from typing import Any

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.data.dataset import peek_rows
from posttrain.evals.held_out_tasks import check_eval_terms
from posttrain.spec.schema import RunSpec


def reward_columns(name: str, params: dict[str, Any]) -> list[str]:
    """The dataset columns a reward reads. A user's reward is their code: its columns are
    read in the isolated child with a time limit, never by importing it here."""
    from posttrain.rewards.isolated import inspect_reward
    from posttrain.rewards.registry import REWARDS, get_reward

    if name in REWARDS:
        return list(get_reward(name, params).columns)
    get_reward(name, params)  # a malformed reference fails here, before a process starts
    return list(inspect_reward(name, params)["columns"])


def check_data(spec: RunSpec) -> list[str]:
    """Before anything starts: the data exists and has every column the spec and reward use,
    and evaluate's own terms (eval.path, eval.metrics) are readable. Returns the reward's
    columns."""
    columns = reward_columns(spec.reward.name, spec.reward.params) if spec.reward else []
    rows = peek_rows(spec.dataset)
    check_eval_terms(spec)  # eval.path's columns, eval.metrics' columns: said before training
    if rows is None:
        return columns
    if not rows:
        raise ConfigError(f"dataset {spec.dataset.path or spec.dataset.builtin} has no rows")
    # The trainer copies the reference column to "reference" for the built-in rewards: a
    # reward that reads it needs that column, whatever the default.
    ds = spec.dataset
    if "reference" in columns and ds.reference_column is None:
        raise ConfigError(
            f"reward '{spec.reward.name}' reads each row's reference answer, and "  # type: ignore[union-attr]
            f"dataset.reference_column is null; name the column that holds it"
        )
    extra = tuple(ds.reference_column if c == "reference" else c for c in columns)
    algorithm_of(spec).check_columns(ds, rows, extra)
    return columns
