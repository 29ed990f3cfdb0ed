"""What a launch resolves into, read by every layer below the edge that resolves it.

`posttrain.launching.resolve` validates a spec once into a RunPlan: the spec, the reward's
columns, the backend, the price (CostEstimate, from `posttrain.tools.plan`), and the base
model, following resume chains. The backends (posttrain.runs.backend), approval, the ledger
and run.json read the plan's answers; nothing downstream parses the spec again. The plan is
data, so it lives below both its readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.spec.schema import RunSpec


class CostEstimate(BaseModel):
    backend: str
    gpu: str | None = Field(None, description="GPU type, e.g. H100 (None on the local backend).")
    gpu_count: int = 1
    batch_per_gpu: int | None = Field(
        None,
        description="On several GPUs: each one's share of algorithm.batch_size, which is the "
        "batch of all of them together (a step trains the spec's batch whatever the count).",
    )
    usd_per_s: float = Field(0.0, description="Price of one GPU, $/s.")
    cpu_cores: float = Field(0.0, description="Physical CPU cores the container holds.")
    memory_gib: int = Field(0, description="Memory the container holds, GiB.")
    container_usd_per_s: float = Field(
        0.0,
        description="Every charge of one second of the run's container: its GPUs, CPU cores "
        "and memory (what the other prices here are computed from).",
    )
    worst_case_s: float = Field(
        0.0,
        description="The most container seconds the run can be billed: its timeout, plus two "
        "container starts (every restart Modal makes resumes inside the timeout; one after it "
        "ends at once).",
    )
    step_s: float = Field(description="Estimated seconds per training step.")
    warm_steps: int = Field(0, description="Warm-start (SFT) steps before training; 0: none.")
    warm_step_s: float = Field(0.0, description="Estimated seconds per warm-start step.")
    expected_s: float = Field(
        description="Estimated wall time, start-up included, as the timeout leaves it (capped)."
    )
    expected_high_s: float = Field(description="The upper estimate, capped by the timeout.")
    expected_usd: float = Field(description="What the run is expected to spend (capped).")
    expected_high_usd: float = Field(description="The upper estimate's spend (capped).")
    run_s: float = Field(0.0, description="The whole run's expected wall time, uncapped.")
    run_high_s: float = Field(0.0, description="The whole run's upper estimate, uncapped.")
    run_usd: float = Field(0.0, description="What finishing the whole run is expected to cost.")
    run_high_usd: float = Field(0.0, description="Finishing's upper estimate.")
    stop_step: int | None = Field(
        None,
        description="Set when the timeout is expected to stop the run: about the step reached.",
    )
    timeout_s: int
    worst_case_usd: float = Field(
        description="The most the run can cost: worst_case_s at container_usd_per_s (and a "
        "paid judge's worst case)."
    )
    judge: dict[str, Any] | None = Field(
        None,
        description="A paid judge's share, in the prices above: calls (no cache hit assumed), "
        "tokens in and out, its price per million tokens and where that came from.",
    )
    basis: str = Field(description="What the estimate is based on, and how far it may be off.")
    runs_used: list[str] = Field(
        default_factory=list, description="Finished runs whose measured steps were used."
    )
    timeout_note: str | None = Field(
        None, description="Set when the run is likely (or may be) stopped by its timeout."
    )
    refused: str | None = Field(
        None,
        description="Set when launch refuses this spec where it is aimed: why, and the fix. "
        "The figures are then those of `alternative`, never of a run that cannot start.",
    )
    alternative: CostEstimate | None = Field(
        None, description="With `refused`: the same spec priced on compute.backend modal."
    )
    summary: str = Field("", description="The price in words, the timeout's stop first.")
    prices_as_of: str


class Base(BaseModel):
    """What training starts from: the spec's own model, or a folder of an earlier run."""

    run_id: str | None = Field(None, description="None: the spec's model itself.")
    folder: str | None = Field(None, description="Inside that run, e.g. 'warmstart'.")
    described: str

    def path(self, runs_root: Path) -> Path | None:
        """The folder to load, or None for the spec's own model."""
        if self.run_id is None:
            return None
        return runs_root / self.run_id / (self.folder or "final")


class Resume(BaseModel):
    run_id: str
    checkpoint: str = Field(description="Relative to that run's folder.")
    step: int


class RunPlan(BaseModel):
    spec: RunSpec
    spec_id: str
    key: str = Field(description="The idempotency key: one key is one run.")
    explicit_key: bool
    backend: str
    reward_columns: list[str]
    cost: CostEstimate
    base: Base
    resume: Resume | None = None
    dry_run_status: str | None = None

    def run_meta(self) -> dict[str, Any]:
        """What run.json keeps of the plan (the trainer and evaluate read base and resume)."""
        return {
            "spec_id": self.spec_id,
            "backend": self.backend,
            "idempotency_key": self.key,
            "base": self.base.model_dump(),
            "resume": self.resume.model_dump() if self.resume else None,
            "worst_case_usd": self.cost.worst_case_usd,
            "expected_usd": self.cost.expected_usd,
            "expected_s": self.cost.expected_s,
            "step_s": self.cost.step_s,
        }
