"""What the run verbs return (posttrain.tools.runs): the pydantic models whose JSON schemas
are the MCP tools' output schemas and the CLI's --json shapes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.pricing.projection import Projection

# The ids of several runs launched as one: a group (one spec, several seeds) and an experiment
# (a sweep's arms x seeds). run.json's group_id holds one; every verb taking a run id takes it.
GROUP_ID_PREFIX = "grp-"
EXPERIMENT_ID_PREFIX = "exp-"


def id_kind(some_id: str) -> Literal["run", "group", "experiment"]:
    """What an id names, by its prefix: decided here and nowhere else."""
    if some_id.startswith(EXPERIMENT_ID_PREFIX):
        return "experiment"
    if some_id.startswith(GROUP_ID_PREFIX):
        return "group"
    return "run"


TREND_WINDOW = 10  # steps averaged at each end of the reward trend


class RunSummary(BaseModel):
    run_id: str
    name: str | None = None
    status: str = Field(description="queued, running, stalled, succeeded, failed or cancelled")
    stage: str | None = None
    model: str | None = None
    kind: str | None = None
    backend: str | None = None
    step: int = 0
    total_steps: int | None = None
    reward: float | None = Field(None, description="Mean reward of the latest training step.")
    best_reward: float | None = None
    created_at: float | None = None
    age_s: float | None = None
    cost_usd: float = 0.0
    group_id: str | None = Field(
        None, description="The run group (one run per seed) or experiment (exp-...)."
    )
    seed: int | None = None
    arm: str | None = Field(None, description="An experiment's arm, named by its overrides.")
    stopped_early: str | None = Field(
        None, description="Why sweep.early_stop cancelled this run, and the money it saved."
    )


class Trend(BaseModel):
    first_mean: float | None = Field(None, description="Mean reward over the first steps.")
    last_mean: float | None = Field(None, description="Mean reward over the last steps.")
    window: int = TREND_WINDOW
    delta: float | None = None


class StoredEvaluation(BaseModel):
    """One evaluation kept with a run (posttrain.evals.history)."""

    path: str = Field(description="Its file, relative to the run directory.")
    created_at: float | None = None
    evaluated: str | None = Field(
        None, description="What was evaluated: the run, or the group or experiment arm."
    )
    verdict: str
    tasks_used: int | None = None


class RunDetail(RunSummary):
    phase: str | None = Field(None, description="warmstart or train: what `step` counts.")
    warmstart_steps: int | None = None
    spec_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    elapsed_s: float | None = None
    stalled: bool = False
    unreachable: str | None = Field(None, description="Set while the backend cannot be reached.")
    cause: str | None = Field(None, description="Why the run failed or was cancelled.")
    still_running: list[str] = Field(
        default_factory=list,
        description="The run's processes (trainer, supervisor) still alive though its status "
        "is final; cancel_run stops them.",
    )
    trend: Trend = Field(default_factory=Trend)
    components: dict[str, float] = Field(default_factory=dict, description="Latest step's means.")
    preference: dict[str, Any] | None = Field(
        None,
        description="DPO: the training batches' margin (chosen minus rejected implicit reward), "
        "preference_accuracy (share of pairs ranked right) and logp_chosen / logp_rejected "
        "(summed log-likelihoods), each as {first, last}: means over the first and the last "
        "`window` steps. logp_chosen falling while the margin grows is DPO's known failure.",
    )
    checkpoints: list[dict[str, Any]] = Field(default_factory=list)
    health: list[str] = Field(default_factory=list, description="Warnings from metrics/traces.")
    heldout: list[dict[str, Any]] = Field(
        default_factory=list,
        description="With algorithm.eval_every: the reward (and reference_nll) on held-out "
        "prompts before step 1 and every eval_every steps, [{step, reward, reference_nll, n}].",
    )
    evaluation: dict[str, Any] | None = Field(
        None, description="The latest evaluate verdict, with the reward's base and trained means."
    )
    evaluations: list[StoredEvaluation] = Field(
        default_factory=list,
        description="Every evaluation of the run, oldest first (each is kept): evaluating "
        "again until one says improved shows here.",
    )
    run_dir: str | None = None
    torn_lines: int = 0
    projection: Projection | None = Field(
        None,
        description="While it runs: cost so far, projected total and end from its measured "
        "seconds per step, against the timeout and the approved estimate.",
    )
    dry_run: dict[str, Any] | None = Field(
        None,
        description="Set for a dry run on a stand-in model: what it proved, what it cannot "
        "prove, the tokenizer used. Its rewards come from random weights and mean nothing.",
    )
    metrics: list[dict[str, Any]] | None = Field(
        None,
        description="Per-step metrics (verbose): every step up to 2,000, else 2,000 evenly "
        "spaced steps and the last.",
    )


class LogLine(BaseModel):
    pos: int = Field(description="Cursor: pass as `after` to read only newer lines.")
    t: float | None
    level: str
    message: str


class LogPage(BaseModel):
    run_id: str
    lines: list[LogLine]
    cursor: int | None = Field(None, description="The last line's pos; None if no lines.")
    status: str


class TraceRow(BaseModel):
    step: int
    idx: int
    group: int | None = None
    prompt: str | None
    completion: str | None
    reward: float | None
    components: dict[str, float | None] = Field(default_factory=dict)
    reason: str | None = Field(
        None, description="The judge's short reason for its score, where a judge scored it."
    )
    reference: str | None = None
    rendered: str | None = Field(
        None, description="The prompt as the model read it: chat template, tokens, decoded."
    )
    trained: str | None = Field(
        None,
        description="SFT: the exact text this row trains on, decoded from the trainer's own "
        "token ids; text between ⟦ and ⟧ carries the loss.",
    )
    episode: dict[str, Any] | None = Field(
        None,
        description="An environment run: the whole episode, {turns: [{assistant, calls: "
        "[{name, arguments, result, ok}]}], final, tool_calls, tool_errors, turn_count, "
        "observation}; `rendered` is then the whole conversation through the chat template.",
    )


class TracePage(BaseModel):
    run_id: str
    phase: str
    available_steps: list[int]
    steps: dict[int, list[TraceRow]]
    next_steps: str | None = Field(
        None, description="More steps matched than one page holds: pass this as steps."
    )
    note: str | None = None
    shared: dict[str, str] = Field(
        default_factory=dict,
        description="What every sample of the page starts with, said once: by field (rendered, "
        "trained), the head (system prompt, tool schemas) each row's value continues.",
    )


class CancelResult(BaseModel):
    run_id: str = Field(description="The run, or the group or experiment, cancelled.")
    stopped: bool = Field(description="Every process of it is gone (a group: of every run).")
    how: str
    status: str
    runs: list[CancelResult] = Field(
        default_factory=list, description="A group's or an experiment's runs, each cancelled."
    )


class Stage(BaseModel):
    stage: str
    t: float
