"""evaluate: is the trained model better than its base, on held-out tasks, beyond the noise?

One code path for both arms (posttrain.gpu.generate.generate_job): the base passes run first
(three seeds by default, which measure the evaluation's own noise), then the adapter is
attached and the trained pass runs with base pass 1's seed on the same tasks. Each task gets
k samples. Every metric gets paired per-task deltas, a bootstrap interval, a sign-flip
p-value, the noise floor and a verdict; the training reward's verdict is the headline, and a
metric the training did not optimise (answer length, relevance) is reported beside it.
Results are stored with the run (evaluations/*.json and an `evaluation` event).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.dataset import prepare
from posttrain.errors import ConfigError
from posttrain.evals import stats
from posttrain.evals.decontam import decontaminate
from posttrain.rewards.guards import score_rows
from posttrain.rewards.registry import get_reward
from posttrain.rewards.text import completion_text, plain_text
from posttrain.runs.layout import HOLDOUT, SPEC, EventWriter, write_json_atomic
from posttrain.spec import load_spec

RHYME_RATE_AT = 0.75  # a sample "rhymes" when its rhyme component reaches this
EXAMPLES = 3


class MetricResult(BaseModel):
    name: str
    is_training_reward: bool = False
    base_pass_means: list[float] = Field(description="The metric's mean in each base pass.")
    base_mean: float = Field(description="Base pass 1, paired with the trained pass.")
    trained_mean: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    noise_floor: float
    noise_formula: str
    verdict: str
    degenerate: str | None = None


class PassRates(BaseModel):
    threshold: float
    k: int
    base: dict[str, float]
    trained: dict[str, float]


class EvalResult(BaseModel):
    run_id: str
    created_at: float
    verdict: str = Field(description="The headline: the training reward's verdict.")
    tasks_total: int
    tasks_used: int
    dropped_contaminated: dict[str, int]
    k: int
    base_passes: int
    seeds: dict[str, Any]
    metrics: list[MetricResult]
    pass_rates: PassRates
    tasks_needed: int | None = Field(
        None, description="Held-out tasks for 80% power at the observed reward effect."
    )
    warnings: list[str] = Field(default_factory=list)
    examples: list[dict[str, Any]] = Field(default_factory=list)
    path: str | None = None


def _load_rows(path: Path) -> list[dict[str, Any]]:
    import json

    if not path.is_file():
        raise ConfigError(f"{path} is missing: the run kept no held-out rows (holdout_share 0?)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def per_sample_metrics(
    reward: Any, completions: list[str], tasks: list[dict[str, Any]], k: int
) -> dict[str, list[list[float]]]:
    """metric -> [task][sample] values, for one pass."""
    scores = score_rows(reward, completions, [t for t in tasks for _ in range(k)])
    values: dict[str, list[float]] = {"reward": scores.rewards}
    for name in reward.headline:
        values[name] = scores.components[name]
    if "rhyme" in scores.components:
        values["rhyme_rate"] = [float(v >= RHYME_RATE_AT) for v in scores.components["rhyme"]]
    values["length_words"] = [
        float(len(plain_text(completion_text(c)).split())) for c in completions
    ]
    return {
        name: [vals[i * k : (i + 1) * k] for i in range(len(tasks))]
        for name, vals in values.items()
    }


def degenerate(values: list[float]) -> str | None:
    if values and all(v == 0 for v in values):
        return "every score is 0"
    if values and all(v == 1 for v in values):
        return "every score is 1"
    return None


def metric_result(
    name: str,
    base: list[list[list[float]]],
    trained: list[list[float]],
    *,
    seed: int,
    training_seeds: int,
) -> MetricResult:
    """base: [pass][task][sample]; trained: [task][sample]."""
    task_means = [[statistics.fmean(s) for s in one_pass] for one_pass in base]
    trained_means = [statistics.fmean(s) for s in trained]
    deltas = [t - b for t, b in zip(trained_means, task_means[0], strict=True)]
    pass_means = [statistics.fmean(p) for p in task_means]
    floor = stats.noise_floor(pass_means)
    ci = stats.bootstrap_ci(deltas, seed=seed)
    delta = statistics.fmean(deltas)
    every = [v for one_pass in base for task in one_pass for v in task] + [
        v for task in trained for v in task
    ]
    bad = degenerate(every) if name != "length_words" else None
    verdict = stats.verdict(
        delta,
        ci,
        floor.value,
        len(deltas),
        training_seeds=training_seeds,
        is_training_reward=name == "reward",
        degenerate=bad is not None,
    )
    return MetricResult(
        name=name,
        is_training_reward=name == "reward",
        base_pass_means=pass_means,
        base_mean=pass_means[0],
        trained_mean=statistics.fmean(trained_means),
        delta=delta,
        ci_low=ci[0],
        ci_high=ci[1],
        p_value=stats.sign_flip_p(deltas, seed=seed),
        noise_floor=floor.value,
        noise_formula=floor.formula,
        verdict=verdict.text,
        degenerate=bad,
    )


def pass_rates(
    base: list[list[float]], trained: list[list[float]], threshold: float, k: int
) -> PassRates:
    def rates(samples: list[list[float]]) -> dict[str, float]:
        counts = [sum(v >= threshold for v in task) for task in samples]
        return {
            "pass@1": statistics.fmean(stats.pass_at_k(k, c, 1) for c in counts),
            f"pass@{k}": statistics.fmean(stats.pass_at_k(k, c, k) for c in counts),
            f"pass^{k}": statistics.fmean(stats.pass_hat_k(k, c, k) for c in counts),
        }

    return PassRates(threshold=threshold, k=k, base=rates(base), trained=rates(trained))


DEGENERATE_CAUSE = (
    "a degenerate metric is not evidence: it probably reads the wrong field (a column name or "
    "the completion's shape), or every sample fails the same way; check the reward with "
    "`posttrain reward check` and read the samples"
)


def evaluate_run(
    run_dir: Path,
    generate: Any,
    *,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    training_seeds: int = 1,
) -> EvalResult:
    """Evaluate a finished run; `generate(job) -> {"base": ..., "trained": ...}` runs the
    models (in this process, or on Modal)."""
    if base_passes < 2:
        raise ConfigError(
            "base_passes must be at least 2 (3 recommended): the noise floor "
            "is measured between base passes"
        )
    spec = load_spec(run_dir / SPEC)
    reward = get_reward(spec.reward.name, spec.reward.params)
    holdout = _load_rows(run_dir / HOLDOUT)
    warnings: list[str] = []
    try:
        train_rows = prepare(spec.dataset, spec.algorithm.kind).train
    except Exception as exc:  # the training data may be unreachable here (a hub dataset)
        train_rows = []
        warnings.append(f"decontamination skipped: the training rows could not be loaded ({exc})")
    clean = decontaminate(holdout, train_rows)
    tasks = clean.kept[:max_tasks]
    if clean.dropped:
        warnings.append(
            f"dropped {clean.dropped} held-out tasks seen in training (same id "
            f"{clean.same_id}, same text {clean.same_text}, 8-gram overlap "
            f"{clean.ngram_overlap}), e.g. {clean.examples[:2]}"
        )
    if len(tasks) < stats.MIN_TASKS_ANY:
        raise ConfigError(
            f"only {len(tasks)} clean held-out tasks remain (need at least "
            f"{stats.MIN_TASKS_ANY}); raise dataset.holdout_share"
        )
    seeds = {"base": [seed + 1 + i for i in range(base_passes)], "trained": seed + 1}
    job = {
        "prompts": [t["prompt"] for t in tasks],
        "tools": [t.get("tools") for t in tasks],  # the schemas each prompt trained with
        "k": k,
        "base_seeds": seeds["base"],
        "trained_seed": seeds["trained"],
        "max_new_tokens": spec.algorithm.max_completion_length,
        "temperature": spec.algorithm.temperature,
        "template_kwargs": spec.model.template_kwargs(),
    }
    out = generate(job)
    base = [
        per_sample_metrics(reward, [c for task in p for c in task], tasks, k) for p in out["base"]
    ]
    trained = per_sample_metrics(reward, [c for task in out["trained"] for c in task], tasks, k)
    metrics = [
        metric_result(
            name, [b[name] for b in base], trained[name], seed=seed, training_seeds=training_seeds
        )
        for name in trained
    ]
    for m in metrics:
        if m.degenerate:
            warnings.append(
                f"DEGENERATE {m.name}: {m.degenerate} across every pass; {DEGENERATE_CAUSE}"
            )
    top = reward.value_range[1]
    threshold = (
        threshold
        if threshold is not None
        else (
            0.5 * top
            if top != float("inf")
            else statistics.median(v for task in base[0]["reward"] for v in task)
        )
    )
    headline = metrics[0]
    deltas_sd = statistics.pstdev(
        [
            statistics.fmean(t) - statistics.fmean(b)
            for t, b in zip(trained["reward"], base[0]["reward"], strict=True)
        ]
    )
    needed = (
        stats.holdout_size(headline.delta, deltas_sd)
        if headline.delta > 0 and deltas_sd > 0
        else None
    )
    examples = [
        {
            "prompt": tasks[i]["prompt_text"],
            "base": out["base"][0][i][0],
            "trained": out["trained"][i][0],
            "base_reward": base[0]["reward"][i][0],
            "trained_reward": trained["reward"][i][0],
        }
        for i in range(min(EXAMPLES, len(tasks)))
    ]
    return EvalResult(
        run_id=run_dir.name,
        created_at=time.time(),
        verdict=headline.verdict,
        tasks_total=len(holdout),
        tasks_used=len(tasks),
        dropped_contaminated={
            "same_id": clean.same_id,
            "same_text": clean.same_text,
            "ngram_overlap": clean.ngram_overlap,
            "duplicates": clean.duplicates,
        },
        k=k,
        base_passes=base_passes,
        seeds=seeds,
        metrics=metrics,
        pass_rates=pass_rates(base[0]["reward"], trained["reward"], threshold, k),
        tasks_needed=needed,
        warnings=warnings,
        examples=examples,
    )


def store(run_dir: Path, result: EvalResult) -> EvalResult:
    """Keep the result with the run, and say so in its events."""
    path = run_dir / "evaluations" / f"eval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    result.path = str(path.relative_to(run_dir))
    write_json_atomic(path, result.model_dump(mode="json"))
    events = EventWriter(run_dir)
    events.write("evaluation", durable=True, path=result.path, verdict=result.verdict)
    events.close()
    return result


def latest(run_dir: Path) -> dict[str, Any] | None:
    """The newest stored evaluation of a run, or None."""
    import json

    files = sorted((run_dir / "evaluations").glob("eval-*.json"))
    return json.loads(files[-1].read_text(encoding="utf-8")) if files else None
