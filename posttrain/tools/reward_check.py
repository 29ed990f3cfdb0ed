"""check_reward: the probe battery, on a spec's data or a data file, before any training.

Built-in rewards run here; a user's reward file runs in a child process with a time limit
(posttrain.rewards.isolated), because it is someone's code and may hang or crash.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from posttrain.core.errors import ConfigError
from posttrain.core.jsonl import jsonl_objects
from posttrain.core.paths import expand
from posttrain.data.dataset import chat_columns, prepare, read_rows
from posttrain.rewards.isolated import probe_in_subprocess
from posttrain.rewards.judge.agreement import agreement, read_labels
from posttrain.rewards.probe_families import parse_families
from posttrain.rewards.probes import run_probes
from posttrain.rewards.registry import REWARDS, get_reward
from posttrain.spec.schema import DEFAULT_REFERENCE, DatasetSpec, load_spec


class ProbeOut(BaseModel):
    name: str
    mean: float
    max: float
    flagged: bool
    verdict: str
    example: str
    example_score: float
    example_components: dict[str, float] = Field(default_factory=dict)
    family: str = Field(
        "", description="Its probe family (generic, answer, rhyme, format, tool, judge, user)."
    )


class DistributionOut(BaseModel):
    n: int
    mean: float
    std: float
    min: float
    max: float
    degenerate: str | None = None


class RewardCheck(BaseModel):
    reward: str
    rows: int
    honest_source: str
    honest: DistributionOut
    probes: list[ProbeOut]
    flagged: list[str] = Field(description="Probes that score as high as honest answers.")
    accepted: list[str] = Field(
        default_factory=list,
        description="The reference's other forms (bare, re-cased, 19.0, in words) the reward "
        "pays as well as honest answers: what it accepts, not exploits.",
    )
    warnings: list[str]
    notes: list[str]
    families: list[str] = Field(
        default_factory=list, description="The probe families run (generic always)."
    )
    families_not_run: dict[str, str] = Field(
        default_factory=dict,
        description="Each family not run, with why; name one in `families` to run it.",
    )
    agreement: dict[str, Any] | None = Field(
        None,
        description="A judge against your labels (--labels): Spearman's rho with a 95% "
        "bootstrap interval, answers it could not grade, and a verdict.",
    )
    judge: dict[str, Any] | None = Field(
        None, description="A judge's cost here: requests sent, verdicts from the cache."
    )


JUDGE_ROWS = 8  # rows a judge is probed on unless asked: each probe costs a call a row


def _prepared_rows(ds: DatasetSpec, rows: int) -> list[dict[str, Any]]:
    """The first rows as the trainer prepares them (prompt_text, reference, tools, the other
    columns), less the chat-form prompt and completion the probes do not read."""
    prepared = prepare(ds, "prompts")
    return [
        {k: v for k, v in r.items() if k not in ("prompt", "completion")}
        for r in prepared.train[: max(rows, 1)]
    ]


def check_reward(
    reward: str | None = None,
    params: dict[str, Any] | None = None,
    *,
    spec: dict[str, Any] | str | None = None,
    data: str | None = None,
    prompt_column: str = "prompt",
    reference_column: str | None = None,
    honest_column: str | None = None,
    rows: int | None = None,
    timeout_s: float | None = None,
    probes: str | None = None,
    labels: str | None = None,
    families: str | list[str] | None = None,
) -> RewardCheck:
    """Score the probe battery beside honest answers; flag exploits and degenerate rewards.
    `reward`: None checks the spec's own reward; a reward that names the spec's takes the
    spec's params, each overridden by one in `params`. `probes`: a JSONL file of the user's
    own probes, {"name", "completion", "max_score"} a line (`{prompt}` and `{reference}` in a
    completion are each row's). `labels` (a judge): a JSONL file of {"prompt", "completion",
    "label"}, for the judge's agreement with them. `rows`: 32, or 8 for a judge (each probe
    costs one of its calls a row). `families`: the probe families to run ("rhyme,answer");
    None chooses them by what the reward pays (rewards/probe_families.py)."""
    if (spec is None) == (data is None):
        raise ConfigError("give either spec (the run's data) or data (a file), not both/neither")
    run_spec = load_spec(spec) if spec is not None else None
    if reward is None:
        if run_spec is None or run_spec.reward is None:
            raise ConfigError(
                "name the reward to check (a registry name, e.g. rhyme, or "
                "path/to/file.py:function), or give a spec with a reward section to check its"
                + (" (this spec has none)" if run_spec is not None else "")
            )
        reward = run_spec.reward.name
    if run_spec is not None and run_spec.reward and run_spec.reward.name == reward:
        params = {**run_spec.reward.params, **(params or {})}  # the spec's, then the caller's
    parse_families(families)  # a misspelt family is refused before any row is read
    info = REWARDS.get(reward)
    judged = bool(info and info.default.judged)
    rows = rows or (JUDGE_ROWS if judged else 32)
    if labels and not judged:
        raise ConfigError(f"--labels checks a judge's agreement; reward '{reward}' is no judge")
    chats = None
    if run_spec is not None:
        table = _prepared_rows(run_spec.dataset, rows)
        prompt_column = "prompt_text"
        if reference_column is None and any("reference" in r for r in table):
            reference_column = "reference"  # the spec's reference column, as prepared
        # none: the honest answers are the first column the reward reads (a label, a total)
    else:
        table = read_rows(str(data), limit=rows)
        if chats := chat_columns(table):  # a file of chats is read as the spec reads it
            ds = DatasetSpec(
                path=str(data),
                messages_column=chats[0],
                tools_column=chats[1],
                reference_column=reference_column or DEFAULT_REFERENCE,
                holdout_share=0.0,
            )
            table = _prepared_rows(ds, rows)
            prompt_column, reference_column = "prompt_text", "reference"
    params = dict(params or {})
    # a judge sees a reference only where its own params say so: the check judges it as it
    # will train, so the reference column is never added to its params here
    if reference_column and info and "reference_column" in info.parameters and not judged:
        # a composite reward (rhyme_relevance) routes it to the part that reads references
        params.setdefault("reference_column", reference_column)
    if (
        (spec is not None or chats)
        and reference_column
        and info
        and "label_column" in info.parameters
    ):
        params.setdefault("label_column", reference_column)  # tool_call: the spec's reference
    job = {
        "reward": reward,
        "params": params,
        "rows": table,
        "prompt_column": prompt_column,
        "reference_column": reference_column,
        "honest_column": honest_column,
        "max_rows": rows,
        "user_probes": read_user_probes(probes) if probes else [],
        "families": families,
    }
    if reward in REWARDS:
        built = get_reward(reward, params)
        if judged:
            built.refuse_unpriced("check_reward")
            built.ready()  # a judge that is down is said by name before any probe
        report = run_probes(
            built,
            table,
            prompt_column=prompt_column,
            reference_column=reference_column,
            honest_column=honest_column,
            max_rows=rows,
            user_probes=job["user_probes"],
            families=families,
        ).to_dict()
        if labels:
            report["agreement"] = agreement(built, read_labels(labels)).to_dict()
        report["judge"] = built.usage()
    else:
        get_reward(reward, params)  # a malformed ref fails here, before a process starts
        report = probe_in_subprocess(job, timeout_s)
    return RewardCheck(**report)


MAX_USER_PROBES = 100


def read_user_probes(path: str) -> list[dict[str, Any]]:
    """The user's probes file, checked line by line: each error names the line and the fix."""
    file = expand(path)
    probes = []
    lines = jsonl_objects(
        path,
        "probes file",
        ("name", "completion", "max_score"),
        '{"name": "...", "completion": "... {reference} ...", "max_score": 0}',
    )
    for n, item in lines:
        try:
            item["max_score"] = float(item["max_score"])
        except (TypeError, ValueError):
            raise ConfigError(f"probes file {file} line {n}: max_score must be a number") from None
        probes.append(
            {
                "name": str(item["name"])[:80],
                "completion": str(item["completion"])[:20_000],
                "max_score": item["max_score"],
            }
        )
    if not probes or len(probes) > MAX_USER_PROBES:
        raise ConfigError(
            f"probes file {file}: give 1 to {MAX_USER_PROBES} probes (got {len(probes)})"
        )
    return probes
