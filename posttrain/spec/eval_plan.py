"""What an evaluation resolves into, read by every layer below the edge that resolves it.

`posttrain.launching.resolve_eval` resolves a request (an id, the options, a judge) once into
an EvalPlan: what the id names (a run, a group of seeds, an experiment's arms x seeds), the
runs evaluated and each one's arm, backend and GPU, the options, the judge, and the price
(EvalCost, from `posttrain.pricing.eval_cost`). Approval, the question to the human, the
detached job (its job.json carries the plan as one document) and the work itself read the
plan's answers; nothing downstream looks at the id's prefix, reprices or picks the judge
again. The plan is data, so it lives below all its readers, as RunPlan does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

Names = Literal["run", "group", "experiment"]


class EvalRun(BaseModel):
    """One run an evaluation measures."""

    run_id: str
    run_dir: str
    backend: str = Field(description="Where its models generate: the backend that trained it.")
    gpu: str | None = Field(None, description="The GPU it generates on; None on this machine.")
    arm: str | None = Field(None, description="An experiment's arm; None outside one.")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="The arm's overrides of the sweep's spec."
    )

    @property
    def path(self) -> Path:
        return Path(self.run_dir)


class EvalCost(BaseModel):
    """An evaluation's price, told once: the containers' worst case and a paid judge's share."""

    gpu: str | None = Field(None, description="The GPU(s) it runs on; None: this machine, free.")
    timeout_s: int = Field(description="Each run's generation window on its GPU, seconds.")
    gpu_worst_case_usd: float = Field(
        0.0, description="Every run's container for its whole window, and two starts each."
    )
    judge: dict[str, Any] | None = Field(
        None,
        description="A paid judge's share (posttrain.rewards.judge.price.JudgeCost): calls, "
        "tokens, price and source, expected and worst case; None for no judge or a free one.",
    )
    worst_case_usd: float = Field(description="The most it can cost: what is approved.")
    expected_usd: float | None = Field(
        None,
        description="What it is expected to cost; None where a GPU's time on an evaluation is "
        "not modelled yet (only its worst case is).",
    )


class EvalPlan(BaseModel):
    run_id: str = Field(description="The id asked for: a run, a group (grp-) or experiment.")
    names: Names = Field(description="What the id names, decided once from it.")
    runs: list[EvalRun] = Field(
        description="The runs evaluated, in order (an experiment's: arm, then seed)."
    )
    skipped: list[str] = Field(
        default_factory=list,
        description="An experiment's runs that failed or were cancelled, 'id (status)': not "
        "evaluated, said in the comparison's warnings.",
    )
    metric: dict[str, Any] | None = Field(
        None, description="An experiment's sweep metric {name, goal} the arms are ranked by."
    )
    k: int = Field(ge=1, le=64, description="Samples per task.")
    base_passes: int = Field(ge=2, le=10, description="Base passes: the evaluation's noise.")
    max_tasks: int = Field(ge=5, le=5000, description="Held-out tasks at most.")
    threshold: float | None = Field(None, description="Pass threshold; None: the reward's.")
    seed: int = 0
    judge: dict[str, Any] | None = Field(
        None,
        description="The judge of the un-optimised metric, checked (its rubric read): "
        "evaluate's judge, else the spec's eval.judge; None: no judge.",
    )
    held_out_files: list[str] = Field(
        default_factory=list,
        description="The sha256 of each eval.path file its runs' specs name: an edited file "
        "is another evaluation, never the job that read the old one.",
    )
    cost: EvalCost
    approved_by: str | None = Field(
        None, description="Who approved its price (free, policy, token, human); None: not yet."
    )

    def request(self) -> dict[str, Any]:
        """What makes one evaluation another: the same request is the same job."""
        return {
            "run_id": self.run_id,
            "k": self.k,
            "base_passes": self.base_passes,
            "max_tasks": self.max_tasks,
            "threshold": self.threshold,
            "seed": self.seed,
            "judge": self.judge,  # another judge is another evaluation (another job)
            # another held-out file is another job; absent (the keys of jobs before) when none
            **({"held_out_files": self.held_out_files} if self.held_out_files else {}),
        }

    def spend_id(self) -> str:
        """The ledger's name for this evaluation's spend (a token is bound to it)."""
        spend = f"eval:{self.run_id}:{self.k}:{self.base_passes}:{self.max_tasks}:{self.seed}"
        if self.cost.judge:  # another judge is another spend
            said = json.dumps(self.judge, sort_keys=True, default=str)
            spend += f":judge:{hashlib.sha256(said.encode()).hexdigest()[:12]}"
        if self.held_out_files:  # an edited held-out file is another spend, approved anew
            files = ",".join(self.held_out_files)
            spend += f":heldout:{hashlib.sha256(files.encode()).hexdigest()[:12]}"
        return spend

    def arms(self) -> dict[str, list[EvalRun]]:
        """The runs by arm, in the experiment's order (one arm, "", outside an experiment)."""
        by_arm: dict[str, list[EvalRun]] = {}
        for run in self.runs:
            by_arm.setdefault(run.arm or "", []).append(run)
        return by_arm
