"""check_dataset: what the trainer will see, before it sees it.

Row counts before and after filters, a few rows rendered through the model's own chat
template, token-length percentiles, schema problems, and rows shared between training and
the holdout (which would make any evaluation on the holdout flatter than the truth); a
held-out file of the user's own (eval.path) is read as evaluate will read it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.sampling import spread
from posttrain.data.dataset import source_rows
from posttrain.data.toolcalls import as_text
from posttrain.evals.held_out_tasks import HeldOutReport, eval_file_check, too_few
from posttrain.gpu.sft_text import MARKS
from posttrain.spec.schema import RunSpec, load_spec

SAMPLES = 3
MAX_PROBLEMS = 20
LENGTH_SAMPLE = 5000  # rows whose token lengths are measured


class Percentiles(BaseModel):
    p50: int
    p90: int
    p99: int
    max: int


class DatasetReport(BaseModel):
    source: str
    rows_total: int
    rows_after_filters: int
    train_rows: int
    holdout_rows: int
    columns: list[str]
    samples: list[str] = Field(
        description="Training rows rendered exactly as the model will see them (SFT: the exact "
        "text the trainer tokenizes, decoded from its token ids)."
    )
    sample_ids: list[str] = Field(default_factory=list, description="The samples' row ids.")
    marked_samples: list[str] = Field(
        default_factory=list, description=f"SFT: the samples again; {MARKS}."
    )
    loss: str | None = Field(None, description="SFT: where the loss falls, and the template.")
    tokenizer: str = Field(description="Which tokenizer and template rendered and counted.")
    prompt_tokens: Percentiles
    sequence_tokens: Percentiles | None = Field(
        None, description="SFT: whole training rows (prompt, answers, tool replies), in tokens."
    )
    reference_tokens: Percentiles | None = None
    problems: list[str] = Field(default_factory=list)
    holdout_overlap: int = Field(0, description="Held-out prompts that also appear in training.")
    overlap_examples: list[str] = Field(default_factory=list)
    eval_file: HeldOutReport | None = Field(
        None,
        description="eval.path, read as evaluate will read it: its rows, the ones left once "
        "those seen in training are dropped (by rule, with examples). Too few left, or any "
        "dropped, is also a problem.",
    )
    pairs: list[dict[str, Any]] = Field(
        default_factory=list,
        description="DPO: the sampled pairs as the trainer reads them (prompt once, chosen, "
        "rejected, decoded from their token ids, with token counts).",
    )


def percentiles(values: list[int]) -> Percentiles:
    ordered = sorted(values) or [0]

    def at(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return Percentiles(p50=at(0.5), p90=at(0.9), p99=at(0.99), max=ordered[-1])


def load_tokenizer_for(spec: RunSpec) -> tuple[Any, str]:
    """The model's real tokenizer (cache, hub or the embedded Qwen vocabulary) and where it
    came from. A model of another family with no tokenizer here is a clear error."""
    from posttrain.gpu.tokenizers import load_tokenizer

    loaded = load_tokenizer(spec.model.name)
    return loaded.tokenizer, loaded.described


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def schema_problems(rows: list[dict[str, Any]], spec: RunSpec) -> list[str]:
    problems = []
    ds = spec.dataset
    texts = [r.get("prompt_text", "") for r in rows]
    empty = [r["id"] for r, t in zip(rows, texts, strict=True) if not str(t).strip()]
    if empty:
        problems.append(f"{len(empty)} rows have an empty prompt (ids {empty[:5]})")
    if ds.reference_column and any(r.get("reference") is not None for r in rows):
        missing = [r["id"] for r in rows if not str(r.get("reference") or "").strip()]
        if missing:
            problems.append(f"{len(missing)} rows have an empty reference (ids {missing[:5]})")
    dupes = [t for t, n in Counter(_norm(t) for t in texts).items() if n > 1 and t]
    if dupes:
        problems.append(f"{len(dupes)} prompts appear more than once (e.g. {dupes[0][:80]!r})")
    ids = Counter(r["id"] for r in rows)
    repeated = [i for i, n in ids.items() if n > 1]
    if repeated:
        problems.append(
            f"{len(repeated)} ids are not unique (e.g. {repeated[0]!r}): the holdout "
            f"split and decontamination key on ids"
        )
    return problems[:MAX_PROBLEMS]


def check_dataset(spec: RunSpec | dict[str, Any] | str, samples: int = SAMPLES) -> DatasetReport:
    """Inspect the data a spec trains on, rendered and counted as the trainer will. SFT
    samples are the exact text the trainer tokenizes, the loss-bearing spans marked."""
    spec = load_spec(spec)
    ds, a, algorithm = spec.dataset, spec.algorithm, algorithm_of(spec)
    raw = source_rows(ds)
    algorithm.check_columns(ds, raw)
    data = algorithm.prepare(ds)
    tokenizer, tokenizer_name = load_tokenizer_for(spec)
    if algorithm.rows in ("pairs", "labelled"):
        found = _pretokenized_report(spec, raw, data, tokenizer, tokenizer_name, samples)
        return _with_eval_file(found, spec, data.train)
    kwargs = spec.model.template_kwargs()
    rows = data.train + data.holdout
    sft = None
    if algorithm.rows == "targets":
        from posttrain.gpu.sft_text import SftRenderer

        family = spec.model.family
        sft = SftRenderer(tokenizer, a.sft_loss, kwargs, family.template if family else None)

    def render(row: dict[str, Any], with_answer: bool) -> str:
        messages = list(row["prompt"])
        if with_answer and row.get("reference"):
            messages.append({"role": "assistant", "content": as_text(row["reference"])})
        return tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=not with_answer,
            tools=row.get("tools"),
            **kwargs,
        )

    # Lengths from an even sample: a million-row dataset is checked in seconds, not hours.
    sampled = [rows[i] for i in spread(len(rows), LENGTH_SAMPLE)]
    unrenderable: dict[str, str] = {}  # row id -> why the template refused it
    sequence_lengths: list[int] = []

    def prompt_length(row: dict[str, Any]) -> int | None:
        try:
            text = render(row, False)
            if sft is not None:
                sequence_lengths.append(len(sft.encode(row)[0]))
        except Exception as exc:  # jinja and template errors come in many types
            unrenderable[row["id"]] = f"row {row['id']!r}: {type(exc).__name__}: {exc}"
            return None
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    prompt_lengths = [n for n in map(prompt_length, sampled) if n is not None]
    renderable = [r for r in data.train if r["id"] not in unrenderable]
    ref_lengths = [
        len(tokenizer(as_text(r["reference"]), add_special_tokens=False)["input_ids"])
        for r in sampled
        if r.get("reference")
    ]
    problems = schema_problems(rows, spec)
    if unrenderable:
        reasons = "; ".join(list(unrenderable.values())[:3])
        problems.append(
            f"{len(unrenderable)} of {len(sampled)} sampled rows do not render through the "
            f"chat template (the trainer refuses them): {reasons}; fix those rows or drop "
            f"them with dataset.filters"
        )
    over = sum(n > a.max_prompt_length for n in prompt_lengths)
    if over:
        problems.append(
            f"{over} of {len(sampled)} sampled prompts are longer than max_prompt_length="
            f"{a.max_prompt_length} tokens"
        )
    limit = a.max_prompt_length + a.max_completion_length
    if sft is not None and any(n > limit for n in sequence_lengths):
        problems.append(
            f"{sum(n > limit for n in sequence_lengths)} of {len(sampled)} sampled rows are "
            f"longer than max_prompt_length + max_completion_length = {limit} tokens: SFT "
            f"drops them (it never truncates a row); raise algorithm.max_completion_length"
        )
    if sft is not None:
        texts = [sft(r) for r in renderable[:samples]]
        shown, marked = [t.text for t in texts], [t.marked for t in texts]
    else:
        shown, marked = [render(r, True) for r in renderable[:samples]], []
    report = DatasetReport(
        **_counts(spec, raw, data),
        samples=shown,
        sample_ids=[r["id"] for r in renderable[:samples]],
        marked_samples=marked,
        loss=f"{sft.described}; {MARKS}" if sft is not None else None,
        tokenizer=tokenizer_name,
        prompt_tokens=percentiles(prompt_lengths),
        sequence_tokens=percentiles(sequence_lengths) if sequence_lengths else None,
        reference_tokens=percentiles(ref_lengths) if ref_lengths else None,
        problems=problems,
    )
    return _with_eval_file(report, spec, data.train)


def _with_eval_file(
    report: DatasetReport, spec: RunSpec, train: list[dict[str, Any]]
) -> DatasetReport:
    """The report, with the spec's eval.path read as evaluate will read it: what
    decontamination will drop from it, and whether enough is left to judge by."""
    found = eval_file_check(spec, train)
    if found is None:
        return report
    held, problems = found.report, []
    dropped = held.rows - held.clean - held.dropped["duplicates"]
    if dropped:
        d = held.dropped
        problems.append(
            f"evaluate will drop {dropped} of {held.rows} rows of eval.path '{held.path}' as "
            f"seen in training (same id {d['same_id']}, same text {d['same_text']}, 8-gram "
            f"overlap {d['ngram_overlap']}), e.g. {held.examples[:2]}: a held-out file "
            f"measures only rows training never saw"
        )
    if refused := too_few(found):
        problems.append(f"evaluate will refuse it: {refused}")
    return report.model_copy(update={"eval_file": held, "problems": report.problems + problems})


def _counts(spec: RunSpec, raw: list[dict[str, Any]], data: Any) -> dict[str, Any]:
    """The report's fields every kind shares: where the rows come from, how many, and the
    held-out prompts that also occur in training."""
    ds = spec.dataset
    train_prompts = {_norm(r["prompt_text"]) for r in data.train}
    overlap = [r for r in data.holdout if _norm(r["prompt_text"]) in train_prompts]
    return {
        "source": ds.path or ds.hf_repo or f"builtin:{ds.builtin}",
        "rows_total": len(raw),
        "rows_after_filters": len(raw) - data.dropped_by_filters,
        "train_rows": len(data.train),
        "holdout_rows": len(data.holdout),
        "columns": sorted(raw[0]) if raw else [],
        "holdout_overlap": len(overlap),
        "overlap_examples": [r["prompt_text"][:120] for r in overlap[:3]],
    }


def _pretokenized_report(
    spec: RunSpec,
    raw: list[dict[str, Any]],
    data: Any,
    tokenizer: Any,
    tokenizer_name: str,
    samples: int,
) -> DatasetReport:
    """DPO's pairs (the prompt once, both answers) or KTO's rows (each answer with its rater's
    verdict), rendered as the trainer reads them, with the flags of such data."""
    algorithm, a = algorithm_of(spec), spec.algorithm
    extra: dict[str, Any] = {}
    if algorithm.rows == "pairs":
        from posttrain.gpu.pair_check import check_pairs, shown

        found, problems, tokens = check_pairs(spec, data, tokenizer, samples)
        answers = tokens["chosen"]
        whole = [p + max(c, r) for p, c, r in zip(*tokens.values(), strict=True)]
        extra["pairs"] = [p.model_dump() for p in found]
    else:
        from posttrain.gpu.kto_check import check_feedback
        from posttrain.gpu.kto_check import shown as shown_row

        shown = shown_row  # type: ignore[assignment]
        limit = a.max_prompt_length + a.max_completion_length
        found, problems, tokens = check_feedback(  # type: ignore[assignment]
            data.train,
            data.holdout,
            tokenizer,
            spec.model.template_kwargs(),
            limit,
            samples,
            spec.dataset.label,
            a.kto,
        )
        answers = tokens["completion"]
        whole = [p + c for p, c in zip(tokens["prompt"], answers, strict=True)]
    return DatasetReport(
        **_counts(spec, raw, data),
        samples=[shown(x) for x in found],  # type: ignore[arg-type]
        sample_ids=[x.id for x in found],
        loss=algorithm.loss_words,
        tokenizer=tokenizer_name,
        prompt_tokens=percentiles(tokens["prompt"]),
        sequence_tokens=percentiles(whole) if whole else None,
        reference_tokens=percentiles(answers) if answers else None,
        problems=problems[:MAX_PROBLEMS],
        **extra,
    )
