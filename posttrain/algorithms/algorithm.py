"""What an algorithm is to posttrain: one frozen record per kind, holding every decision that
depends on the kind, so the rest of the code asks the record and never compares kind names.

A kind decides: the rows it trains on (`rows`, the shape posttrain.data.dataset gives them),
whether it trains on a reward's scores (`rewarded`) and what else it takes (an environment,
per-row tools, an SFT warm-start), its own spec section (`section`), its rules on the shared
fields (`check`), its price and memory terms (`step`, `local_step_s`), what a dry run proves
and cannot (`dry_proves`, `dry_cannot`), what plan says about it (`plan_note`) and how
evaluate compares a trained model with its base (`headline_metric`).

Its trainer builder lives on the GPU side, in a module of its own named in posttrain.gpu.phases.
A new kind is a module here and a line in posttrain.algorithms.kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from posttrain.data.dataset import Prepared, RowShape, check_columns, prepare, shaped
from posttrain.models.catalog import StepTerms


def _nothing(a: Any) -> None:
    return None


def _no_note(spec: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Algorithm:
    name: str  # the spec's algorithm.kind
    title: str  # how text names it: "GRPO", "SFT", "DPO", "distillation", "KTO"
    summary: str  # what it trains on, one line (the spec's help and `posttrain --help`)
    rows: RowShape
    step: StepTerms  # what its step costs in time and memory (posttrain.models.catalog)
    # Seconds a step on 2 CPU cores (bench/smoke.py): the tiny demo model and a stand-in.
    local_step_s: dict[str, float]
    # evaluate's verdict for a run of this kind without a reward of its own, and the metrics
    # it reports beside it, first (the evaluate tests hold evaluate to them)
    headline_metric: str
    dry_proves: str  # what the dry run's training steps showed, in its report
    rewarded: bool = False  # trains on a reward's scores (a default reward is filled in)
    takes_environment: bool = False  # multi-turn episodes in an environment
    takes_tools_column: bool = False  # each row's own tool schemas in its prompt
    takes_warmstart: bool = False  # an SFT pass on the targets first
    # Its own section of `algorithm:` (e.g. `dpo:`), filled with its defaults, and the shared
    # fields only this kind reads (e.g. `teacher`): any other kind refuses them.
    section: tuple[str, type[BaseModel]] | None = None
    own_fields: tuple[str, ...] = ()
    dry_cannot: str | None = None  # what a random-weight stand-in cannot show for this kind
    loss_words: str | None = None  # where its loss falls, as `data check` says it
    check: Callable[[Any], None] = _nothing  # its rules on the algorithm section (ValueError)
    # The fewest rows a GPU's batch may hold, and why: (1, "") for most kinds.
    per_gpu_floor: Callable[[Any], tuple[int, str]] = lambda a: (1, "")
    plan_words: str | None = None  # plan's word on this kind, when it is always the same
    plan_note: Callable[[Any], str | None] = _no_note  # ...else its word for a spec, if any
    unoptimised_metrics: tuple[str, ...] = field(default=())  # see headline_metric
    # Its own reading of a row, for shapes posttrain.data.dataset does not build itself
    # (`labelled`), and the columns that reading needs beyond the prompt's.
    shape_row: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
    row_columns: Callable[[Any, list[dict[str, Any]]], list[str]] | None = None

    def prepare(self, ds: Any) -> Prepared:
        """The spec's rows filtered, split and shaped as this algorithm trains on them."""
        return prepare(ds, self.rows, self.shape_row, self.row_columns)

    def shape(self, ds: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of the spec's columns (a held-out file of the user's own) shaped as this
        algorithm's held-out rows are, every column checked first; no filter, cap or split."""
        self.check_columns(ds, rows)
        return [shaped(row, ds, self.rows, self.shape_row) for row in rows]

    def check_columns(
        self, ds: Any, rows: list[dict[str, Any]], extra: tuple[str, ...] = ()
    ) -> list[str]:
        """The rows' columns, after checking every column the spec, its reward (`extra`) and
        this algorithm read is there."""
        columns = check_columns(ds, rows, self.rows, extra)
        if self.row_columns is not None and rows:
            self.row_columns(ds, rows)
        return columns

    def note_for(self, spec: Any) -> str | None:
        """What plan says about this kind for this spec."""
        return self.plan_words or self.plan_note(spec)

    @property
    def samples(self) -> bool:
        """Whether a step samples answers from the policy (a KV cache; generation priced)."""
        return self.step.samples

    def kl(self, algorithm: Any) -> bool:
        """Whether its loss holds a KL term to the reference at this spec's beta."""
        return self.step.reference == "kl" and algorithm.beta > 0

    def groups(self, algorithm: Any) -> int:
        """The batch's rows that must stay on one GPU together (GRPO's generations of one
        prompt): the batch divides among GPUs in whole groups."""
        return algorithm.num_generations if self.rewarded else 1
