"""The held-out tasks evaluate measures on: the rows the run held out (dataset.holdout_share), or
a file of the user's own (the spec's eval.path), read through the spec's dataset columns and
shaped as the run's own held-out rows are. Either way, tasks seen in training are dropped
(posttrain.evals.decontam) and the overlap is reported: how many, by which rule, examples.

The file is read on this machine, also for a run trained on Modal: the prompts (and the rows
the metrics read) travel in evaluate's job, so the container never needs the file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.core.paths import confine
from posttrain.data.dataset import peek_rows, read_rows
from posttrain.evals import stats
from posttrain.evals.decontam import decontaminate
from posttrain.evals.named_metrics import check_columns, named_metrics
from posttrain.runs.layout import HOLDOUT

PEEK_ROWS = 20  # rows of the held-out file read before a launch to check its columns


class HeldOutReport(BaseModel):
    """Where an evaluation's tasks came from, and what decontamination took out of them."""

    source: Literal["run", "eval.path"] = Field(
        description="run: the rows the run held out; eval.path: the user's own file."
    )
    path: str | None = Field(None, description="The file read (eval.path), as the spec gives it.")
    rows: int = Field(description="Rows read.")
    clean: int = Field(description="Rows left after decontamination (before max_tasks).")
    used: int = Field(description="Tasks measured (at most max_tasks).")
    dropped: dict[str, int] = Field(
        description="Rows dropped, by rule: a training row's id (same_id), its normalised text "
        "(same_text), >= 80% of its own word 8-grams, the template's left out (ngram_overlap); "
        "repeats merged (duplicates)."
    )
    examples: list[str] = Field(default_factory=list, description="Prompts dropped, the first.")


@dataclass
class HeldOut:
    tasks: list[dict[str, Any]]
    report: HeldOutReport
    warnings: list[str] = field(default_factory=list)


def held_out(run_dir: Path, spec: Any, max_tasks: int) -> HeldOut:
    """The clean held-out tasks of a run (its spec's eval.path when it names one), at most
    `max_tasks`; ConfigError when too few remain to say anything."""
    path = spec.eval.path if spec.eval is not None else None
    rows = _user_rows(path, spec) if path else _run_rows(run_dir / HOLDOUT)
    warnings: list[str] = []
    try:
        train = algorithm_of(spec).prepare(spec.dataset).train
    except Exception as exc:  # the training data may be unreachable here (a hub dataset)
        train = []
        warnings.append(f"decontamination skipped: the training rows could not be loaded ({exc})")
    found = _decontaminated(rows, path, train, max_tasks)
    if problem := too_few(found):
        raise ConfigError(problem)
    found.warnings[:0] = warnings
    return found


def eval_file_check(spec: Any, train: list[dict[str, Any]]) -> HeldOut | None:
    """Before training (data check): eval.path's rows as evaluate will read them, against
    these training rows; None without an eval.path. Its warnings say what decontamination
    will drop; `too_few` says whether evaluate will refuse it."""
    path = spec.eval.path if spec.eval is not None else None
    if not path:
        return None
    rows = _user_rows(path, spec)
    return _decontaminated(rows, path, train, len(rows))


def too_few(found: HeldOut) -> str | None:
    """Why evaluate refuses these tasks (fewer clean ones than any verdict needs), or None."""
    if found.report.used >= stats.MIN_TASKS_ANY:
        return None
    path = found.report.path
    where = f"eval.path '{path}'" if path else "the run's held-out rows"
    fix = (
        "add rows to the file that training never saw"
        if path
        else "raise dataset.holdout_share, or give a held-out file of your own (eval.path)"
    )
    dropped = found.report.rows - found.report.clean - found.report.dropped["duplicates"]
    return (
        f"only {found.report.used} clean held-out tasks remain in {where} (need at least "
        f"{stats.MIN_TASKS_ANY}; {dropped} dropped as seen in training, "
        f"{found.report.dropped['duplicates']} repeats); {fix}"
    )


def _decontaminated(
    rows: list[dict[str, Any]], path: str | None, train: list[dict[str, Any]], max_tasks: int
) -> HeldOut:
    clean = decontaminate(rows, train)
    tasks = clean.kept[:max_tasks]
    where = f"eval.path '{path}'" if path else "the run's held-out rows"
    warnings = []
    if clean.dropped:
        warnings.append(
            f"dropped {clean.dropped} of {len(rows)} tasks of {where} seen in training (same "
            f"id {clean.same_id}, same text {clean.same_text}, 8-gram overlap "
            f"{clean.ngram_overlap}), e.g. {clean.examples[:2]}"
        )
    report = HeldOutReport(
        source="eval.path" if path else "run",
        path=path,
        rows=len(rows),
        clean=len(clean.kept),
        used=len(tasks),
        dropped={
            "same_id": clean.same_id,
            "same_text": clean.same_text,
            "ngram_overlap": clean.ngram_overlap,
            "duplicates": clean.duplicates,
        },
        examples=clean.examples,
    )
    return HeldOut(tasks, report, warnings)


def _run_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ConfigError(
            f"{path} is missing: the run kept no held-out rows (holdout_share 0?); give a "
            f"held-out file of your own in the spec's eval.path"
        )
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def check_eval_terms(spec: Any, peek: int = PEEK_ROWS) -> None:
    """Before a launch, from a few rows: eval.path's file has the columns the spec reads, and
    each metric of eval.metrics finds its columns in the held-out rows (the file's, else the
    training data's shape); ConfigError naming the field and the fix. Training spends nothing
    on a run whose evaluation would be refused."""
    if spec.eval is None or (not spec.eval.path and not spec.eval.metrics):
        return
    path = spec.eval.path
    if path:
        rows = _user_rows(path, spec, limit=peek)
    else:
        raw = peek_rows(spec.dataset, peek)
        if not raw:  # a hub dataset is read where the trainer runs
            return
        rows = algorithm_of(spec).shape(spec.dataset, raw)
    check_columns(named_metrics(spec), rows, f"eval.path '{path}'" if path else "the data's rows")


def held_out_file_digest(spec: Any) -> str | None:
    """The sha256 of eval.path's bytes (None without one, or while it is missing: reading it
    says so): an evaluation of the same run on an edited file is another evaluation."""
    path = spec.eval.path if spec.eval is not None else None
    if not path:
        return None
    resolved = confine(path, "eval.path")
    if not resolved.is_file():
        return None
    return hashlib.sha256(resolved.read_bytes()).hexdigest()


def _user_rows(path: str, spec: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """eval.path's rows (the first `limit`), confined to the allowed folders, shaped by the
    spec's columns."""
    resolved = confine(path, "eval.path")
    if not resolved.is_file():
        raise ConfigError(
            f"eval.path '{path}' does not exist (looked for {resolved}); put the held-out file "
            f"back, or launch again with eval.path naming where it is now"
        )
    try:
        raw = read_rows(resolved, limit)
    except ConfigError as exc:  # its line and what is wrong there
        raise ConfigError(f"eval.path '{path}': {exc}") from None
    if not raw:
        raise ConfigError(f"eval.path '{path}' has no rows; give it the held-out rows")
    try:
        return algorithm_of(spec).shape(spec.dataset, raw)
    except ConfigError as exc:
        raise ConfigError(
            f"eval.path '{path}': {exc}. The held-out file is read through the spec's dataset "
            f"columns, like the training data: give it the same columns"
        ) from None
