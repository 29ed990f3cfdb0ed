"""evaluate: is the trained model better than its base, on held-out tasks, beyond the noise?

One code path for both arms (posttrain.gpu.arms.generate_job): the base passes run first
(three seeds by default, which measure the evaluation's own noise), then the adapter is
attached and the trained pass runs with base pass 1's seed on the same tasks. Each task gets
k samples. Every metric gets the one comparison (posttrain.evals.paired): the delta over
paired tasks, its interval holding samples, passes and seeds, and a verdict; the training
reward's verdict is the headline, and a metric the training did not optimise (the user's
eval.metrics, reference_nll, a judge) is reported beside it; answer length, turns and tool
calls are described, never judged. The tasks are the run's held-out rows or the spec's
eval.path (posttrain.evals.held_out_tasks). Results are kept with the run, every one of them
(posttrain.evals.history).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError, RewardError
from posttrain.evals import stats
from posttrain.evals.episode_metrics import (
    DEFAULT_THRESHOLD,
    DESCRIBED,
    LOWER_IS_BETTER,
    OPTIMISED,
    episode_metrics,
    example_text,
)
from posttrain.evals.held_out_tasks import HeldOutReport, held_out
from posttrain.evals.kto_metrics import feedback_metrics
from posttrain.evals.metrics import (
    DIRECTIONLESS,
    MetricResult,
    metric_result,
    per_sample_metrics,
    qualified,
    regressions,
)
from posttrain.evals.named_metrics import Named, check_columns, named_metrics, named_values, score
from posttrain.evals.pass_rates import PassRates, base_pool, pass_rates_of, pass_threshold
from posttrain.evals.planning import planned_tasks
from posttrain.rewards.base import Scores
from posttrain.rewards.guards import score_rows
from posttrain.rewards.judge.metric import METRIC as JUDGE_METRIC
from posttrain.rewards.judge.metric import evaluation_judge, metric_judge, same_judge
from posttrain.rewards.registry import get_reward
from posttrain.rewards.user import UserReward
from posttrain.runs.layout import SPEC
from posttrain.spec.schema import load_spec

EXAMPLES = 3


class EvalResult(BaseModel):
    run_id: str = Field(description="The run, or the group, evaluated.")
    runs: list[str] = Field(default_factory=list, description="Its runs (a group: one a seed).")
    training_seeds: int = 1
    created_at: float
    verdict: str = Field(
        description="The headline: the training reward's verdict, qualified "
        "(improved_with_regression) when an un-optimised metric got worse beyond noise."
    )
    tasks_total: int
    tasks_used: int
    dropped_contaminated: dict[str, int]
    held_out: HeldOutReport | None = Field(
        None,
        description="Where the tasks came from (the run's held-out rows, or the spec's "
        "eval.path) and what decontamination dropped from them, by rule, with examples.",
    )
    k: int
    base_passes: int
    seeds: dict[str, Any]
    metrics: list[MetricResult] = Field(description="What the training reward pays.")
    unoptimised: list[MetricResult] = Field(
        default_factory=list,
        description="What it does not: the spec's eval.metrics, reference_nll (did training "
        "destroy what the model knew?), a judge's eval_judge, and, described but never judged "
        "(verdict 'described'), answer length and an episode's turns and tool calls.",
    )
    pass_rates: PassRates | None = Field(
        None,
        description="Share of tasks whose samples reach the threshold, every seed's trained "
        "pass and every base pass pooled (None: no reward).",
    )
    tasks_needed: int | None = Field(
        None,
        description="Held-out tasks for 80% power to find the minimum detectable effect "
        "(tasks_needed_for says which): from this evaluation's spread, not its observed effect.",
    )
    tasks_needed_for: str | None = None
    warnings: list[str] = Field(default_factory=list)
    examples: list[dict[str, Any]] = Field(default_factory=list)
    path: str | None = None
    # What an experiment's comparison pairs arms on (posttrain.evals.compare): never sent
    # or stored, the per-task values are as long as the held-out set.
    task_prompts: list[str] = Field(default_factory=list, exclude=True)
    task_values: dict[str, list[list[float]]] = Field(
        default_factory=dict, exclude=True, description="metric -> [seed][task] trained mean."
    )
    base_values: dict[str, list[float]] = Field(
        default_factory=dict, exclude=True, description="metric -> [task] base pass 1 mean."
    )


DEGENERATE_CAUSE = (
    "a degenerate metric is not evidence: it probably reads the wrong field (a column name or "
    "the completion's shape), or every sample fails the same way; check the reward with "
    "`posttrain reward check` and read the samples"
)


def evaluate_run(run_dir: Path, generate: Any, **options: Any) -> EvalResult:
    """Evaluate one finished run; `generate(job) -> {"base", "trained", "nll"}` runs the
    models (in a local child, or on Modal); `options` as evaluate_runs takes them."""
    return evaluate_runs([run_dir], [generate], **options)


def evaluate_runs(
    run_dirs: list[Path],
    generators: list[Any],
    *,
    group_id: str | None = None,
    k: int = 4,
    base_passes: int = 3,
    max_tasks: int = 200,
    threshold: float | None = None,
    seed: int = 0,
    progress: Any = None,
    judge: dict[str, Any] | None = None,
    judge_approved: bool = False,
) -> EvalResult:
    """Evaluate finished runs of one spec, one per training seed, on the same held-out tasks.
    `progress(done, total, message)`, when given, hears of each step.

    The first run's base gets every base pass (they measure the evaluation's noise); each
    later run its own base pass 1 when its base differs (its own warm-start), none when the
    base is shared. Each seed's trained pass is paired with its base on the same tasks.
    `judge` (the params of a judge; else the spec's eval.judge) scores every pass besides the
    training reward: the un-optimised metric eval_judge; a paid one only once the caller had
    its price approved (`judge_approved`: posttrain.tools.evaluate)."""
    if base_passes < 2:
        raise ConfigError(
            "base_passes must be at least 2 (3 recommended): the base's passes measure its "
            "sampling noise, and their mean is what the trained model is compared with"
        )
    first = run_dirs[0]
    spec = load_spec(first / SPEC)
    # No reward (an SFT spec may name none): the held-out references' likelihood is the measure
    reward = get_reward(spec.reward.name, spec.reward.params) if spec.reward else None
    warnings: list[str] = []
    second = _second_judge(judge, spec, reward, warnings, judge_approved)
    heldout = held_out(first, spec, max_tasks)  # the run's held-out rows, or eval.path's
    tasks = heldout.tasks
    warnings += heldout.warnings
    named = named_metrics(spec)
    where = f"eval.path '{heldout.report.path}'" if heldout.report.path else "the held-out rows"
    check_columns(named, tasks, where)  # before any model loads
    _names_free(named, reward.headline if reward else ())
    episodic = spec.environment is not None  # whole episodes, scored where they were played
    if threshold is None and spec.eval is not None:
        threshold = spec.eval.pass_threshold
    if episodic:
        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    if (
        not episodic
        and reward is None
        and not named
        and sum(bool(t.get("reference")) for t in tasks) < stats.MIN_TASKS_ANY
    ):
        raise ConfigError(
            f"the spec names no reward and fewer than {stats.MIN_TASKS_ANY} held-out tasks have "
            f"a reference, so there is nothing to measure; give the spec a reward (e.g. "
            f"tool_call), a metric (eval.metrics: [tool_call]) or a dataset.reference_column"
        )
    seeds = {"base": [seed + 1 + i for i in range(base_passes)], "trained": seed + 1}
    own_bases = any((d / "warmstart").is_dir() for d in run_dirs)
    job = {
        "prompts": [t["prompt"] for t in tasks],
        "tools": [t.get("tools") for t in tasks],  # the schemas each prompt trained with
        "references": None if episodic else [t.get("reference") for t in tasks],
        "rows": tasks if episodic else None,  # reset(**row) of each held-out episode
        "pairs": _pairs(tasks) if algorithm_of(spec).rows == "pairs" else None,
        "feedback": _feedback(tasks) if algorithm_of(spec).rows == "labelled" else None,
        "k": k,
        "trained_seed": seeds["trained"],
        "max_new_tokens": spec.algorithm.max_completion_length,
        "temperature": spec.algorithm.temperature,
        "template_kwargs": spec.model.template_kwargs(),
    }
    steps = len(generators) + 1
    report = progress or (lambda done, total, message: None)
    outs = []
    for i, generate in enumerate(generators):
        later = seeds["base"][:1] if own_bases else []
        base_seeds = seeds["base"] if i == 0 else later
        report(
            i,
            steps,
            f"generating for {run_dirs[i].name}: {len(base_seeds)} base pass(es) and the "
            f"trained pass, {len(tasks)} tasks x {k} samples",
        )
        outs.append(generate({**job, "base_seeds": base_seeds}))
    if episodic:
        report(len(generators), steps, "measuring the episodes (scored where they were played)")
        scored = iter(
            episode_metrics(p, threshold)  # type: ignore[arg-type]
            for p in _each_pass(outs)
        )
    else:
        measure = spec.reward.name if spec.reward else "reference_nll (the spec names no reward)"
        report(len(generators), steps, f"scoring {len(outs)} run(s) with {measure}")
        # every pass scored in one call: in a child process when the reward is the user's code
        flat_passes = [[c for task in p for c in task] for p in _each_pass(outs)]
        rows = [t for t in tasks for _ in range(k)]
        every_scores = (
            score_passes(spec, reward, flat_passes, rows) if reward else [None] * len(flat_passes)
        )
        measured = [
            per_sample_metrics(
                reward.headline if reward else (), scores, completions, len(tasks), k
            )
            for scores, completions in zip(every_scores, flat_passes, strict=True)
        ]
        if second is not None:
            report(len(generators), steps, f"asking the judge: {second.base_url}")
            for values, verdicts in zip(measured, judged(second, flat_passes, rows), strict=True):
                values[JUDGE_METRIC] = [verdicts[i * k : (i + 1) * k] for i in range(len(tasks))]
        if named:
            labels = ", ".join(m.label for m in named)
            report(len(generators), steps, f"scoring the spec's eval.metrics: {labels}")
            extra = named_values(named, flat_passes, rows, len(tasks), k)
            for values, more in zip(measured, extra, strict=True):
                values.update(more)
        scored = iter(measured)
    passes = [next(scored) for _ in outs[0]["base"]]
    base_by_seed = [passes[0]] + [next(scored) if o["base"] else passes[0] for o in outs[1:]]
    trained_by_seed = [next(scored) for _ in outs]

    def result(name: str, optimised: bool = True, higher: bool = True) -> MetricResult:
        every = [p[name] for p in passes + base_by_seed + trained_by_seed]
        graded = [i for i in range(len(tasks)) if all(None not in p[i] for p in every)]

        def kept(one: list[list[Any]]) -> list[list[float]]:
            return [one[i] for i in graded]

        return metric_result(
            name,
            [kept(p[name]) for p in passes],
            [kept(b[name]) for b in base_by_seed],
            [kept(t[name]) for t in trained_by_seed],
            optimised=optimised,
            higher_is_better=higher,
        )

    if episodic:
        metrics = [result(name) for name in OPTIMISED]
        unoptimised = [result(n, False, higher=False) for n in LOWER_IS_BETTER]
        unoptimised += [result(n, optimised=False) for n in DESCRIBED]
    else:
        apart = {*DIRECTIONLESS, JUDGE_METRIC, *(m.label for m in named)}
        metrics = [result(name) for name in trained_by_seed[0] if name not in apart]
        unoptimised = [
            result(name, optimised=False) for name in DIRECTIONLESS if name in trained_by_seed[0]
        ]
        if second is not None and (judge_result := _judge_result(result, passes, warnings)):
            unoptimised.insert(0, judge_result)
    mine = [result(m.label, optimised=False) for m in named]
    rewarded = reward is not None or episodic
    metrics, own = _by_kind(metrics, outs, tasks, rewarded, mine, warnings)
    unoptimised = [*own, *mine, *unoptimised]  # the kind's, the user's, then the rest
    for m in metrics + unoptimised:
        if m.degenerate:
            warnings.append(
                f"DEGENERATE {m.name}: {m.degenerate} across every pass; {DEGENERATE_CAUSE}"
            )
    headline = metrics[0]
    rates = None
    if reward or episodic:
        threshold, why = pass_threshold(reward, passes, trained_by_seed, threshold)
        if threshold is None:
            warnings.append(f"pass@k and pass^k not reported: {why}")
        rates = pass_rates_of(base_pool(passes, base_by_seed), trained_by_seed, threshold, k)
    needed, needed_for = planned_tasks(headline, spec.eval.mde if spec.eval else None, reward)

    def reward_of(one_pass: dict[str, list[list[float]]], i: int) -> float | None:
        return one_pass["reward"][i][0] if reward or episodic else None

    shown = example_text if episodic else (lambda sample: sample)
    examples = [
        {
            "prompt": tasks[i]["prompt_text"],
            "base": shown(outs[0]["base"][0][i][0]),
            "trained": shown(outs[0]["trained"][i][0]),
            "base_reward": reward_of(passes[0], i),
            "trained_reward": reward_of(trained_by_seed[0], i),
        }
        for i in range(min(EXAMPLES, len(tasks)))
    ]
    if JUDGE_METRIC in passes[0]:  # the second opinion beside each example
        for i, example in enumerate(examples):
            example["base_judge"] = passes[0][JUDGE_METRIC][i][0]
            example["trained_judge"] = trained_by_seed[0][JUDGE_METRIC][i][0]
    for metric in named:  # and the user's own metrics: {label: [base, trained]}
        for i, example in enumerate(examples):
            pair = [passes[0][metric.label][i][0], trained_by_seed[0][metric.label][i][0]]
            example.setdefault("metrics", {})[metric.label] = pair
    return EvalResult(
        run_id=group_id or first.name,
        runs=[d.name for d in run_dirs],
        training_seeds=len(run_dirs),
        created_at=time.time(),
        verdict=qualified(headline.verdict, regressions(unoptimised)),
        tasks_total=heldout.report.rows,
        tasks_used=len(tasks),
        dropped_contaminated=heldout.report.dropped,
        held_out=heldout.report,
        k=k,
        base_passes=base_passes,
        seeds=seeds,
        metrics=metrics,
        unoptimised=unoptimised,
        pass_rates=rates,
        tasks_needed=needed,
        tasks_needed_for=needed_for,
        warnings=warnings,
        examples=examples,
        task_prompts=[str(t["prompt"]) for t in tasks],
        task_values={
            m.name: [[statistics.fmean(s) for s in one[m.name]] for one in trained_by_seed]
            for m in metrics + unoptimised
            if _every_graded(m.name, trained_by_seed + base_by_seed[:1])
        },
        base_values={
            m.name: [statistics.fmean(s) for s in base_by_seed[0][m.name]]
            for m in metrics + unoptimised
            if _every_graded(m.name, trained_by_seed + base_by_seed[:1])
        },
    )


def _names_free(named: list[Named], taken: Any) -> None:
    """No metric of eval.metrics is reported under a name a metric of the run already has
    (the training reward's components: tool_call's `name`, rhyme_relevance's `rhyme`)."""
    for metric in named:
        if metric.label in taken or metric.label == JUDGE_METRIC:
            raise ConfigError(
                f"{metric.field} would be reported as '{metric.label}', which this run's "
                f"training reward already reports; give it a label of its own "
                f"({{name: {metric.ref}, label: my_{metric.label}}})"
            )


def _by_kind(
    metrics: list[MetricResult],
    outs: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    rewarded: bool,
    mine: list[MetricResult],
    warnings: list[str],
) -> tuple[list[MetricResult], list[MetricResult]]:
    """The headline metrics of the run's kind and its own un-optimised ones, reported first:
    DPO's preference accuracy (margin beside it), KTO's feedback likelihood, a reward's
    metrics; with neither, SFT's (or distillation's) reference_nll. Where not even that can
    be measured, the first of the user's eval.metrics (taken from `mine`) is the headline."""
    nll = _nll_metric(outs)
    nlls = [nll] if nll is not None else []
    preference = _preference_metrics(outs)
    labels = [bool(t["label"]) for t in tasks] if any(o.get("logliks") for o in outs) else []
    feedback = feedback_metrics(outs, labels) if labels else None
    if preference is not None:  # DPO: does the model prefer the held-out chosen answers?
        accuracy, margin = preference
        return [accuracy], [margin, *nlls]
    if feedback is not None:  # KTO: 👍 answers likelier, 👎 ones less likely, paired by row
        return [feedback[0]], [*feedback[1:], *nlls]
    if rewarded:
        return metrics, nlls
    if nll is not None:
        return [nll.model_copy(update={"optimised": True})], []  # what SFT optimises
    if not mine:
        raise ConfigError(
            "the spec names no reward and the references' likelihood could not be measured "
            "on enough tasks; give the spec a reward (e.g. tool_call) or a metric "
            "(eval.metrics: [tool_call])"
        )
    first = mine.pop(0)
    warnings.append(
        f"the headline is eval.metrics' first, {first.name}: the held-out references' "
        f"likelihood could not be measured; training did not optimise {first.name}, so it "
        f"shows a change in what you measure, not that the training objective was learned"
    )
    return [first], []


def _second_judge(
    given: dict[str, Any] | None, spec: Any, reward: Any, warnings: list[str], approved: bool
) -> Any:
    """The judge of the un-optimised metric eval_judge (evaluate's `judge`, else the spec's
    eval.judge), or None. A paid one is refused unless its price was approved."""
    params = evaluation_judge(given, spec)
    if not params:
        return None
    if spec.environment is not None:
        warnings.append(
            f"{JUDGE_METRIC} not measured: judging whole episodes is not built yet (the "
            f"environment's get_reward scores them)"
        )
        return None
    judge = metric_judge(params)
    if not approved:
        judge.refuse_unpriced("evaluate's judge")
    if same_judge(judge, reward):
        warnings.append(
            f"{JUDGE_METRIC} is the training reward's own judge (same rubric and model): it "
            f"measures what training optimised, so it is no second opinion; give eval.judge "
            f"a rubric the training never saw"
        )
    judge.ready()  # down: said now, by its address, before any model loads
    return judge


def judged(judge: Any, passes: list[list[str]], rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The judge's score of every sample of every pass (None: it could not grade it)."""
    return [score_rows(judge, completions, rows).rewards for completions in passes]


def _judge_result(
    result: Any, passes: list[dict[str, list[list[Any]]]], warnings: list[str]
) -> MetricResult | None:
    """eval_judge over the tasks it graded in every pass, or None (with a warning) when too
    few remain to say anything."""
    values = [p[JUDGE_METRIC] for p in passes]
    n = len(values[0])
    ungraded = sum(any(None in p[i] for p in values) for i in range(n))
    if n - ungraded < stats.MIN_TASKS_ANY:
        warnings.append(
            f"{JUDGE_METRIC} not reported: the judge graded every sample of only "
            f"{n - ungraded} of {n} tasks (need {stats.MIN_TASKS_ANY}); check it with "
            f"`posttrain reward check judge`"
        )
        return None
    if ungraded:
        warnings.append(
            f"{JUDGE_METRIC}: {ungraded} of {n} tasks left out, the judge could not grade one "
            f"of their samples"
        )
    return result(JUDGE_METRIC, optimised=False)


def _every_graded(name: str, passes: list[dict[str, list[list[Any]]]]) -> bool:
    return name in passes[0] and all(None not in s for p in passes for s in p[name])


def _each_pass(outs: list[dict[str, Any]]) -> list[Any]:
    """Every pass in the order the metrics are read: the first run's base passes, each later
    run's own base pass (when it has one), then each run's trained pass."""
    every = list(outs[0]["base"])
    every += [o["base"][0] for o in outs[1:] if o["base"]]
    return every + [o["trained"] for o in outs]


def score_passes(
    spec: Any, reward: Any, passes: list[list[str]], rows: list[dict[str, Any]]
) -> list[Scores]:
    """The reward's scores of each pass: here for a built-in reward, in an isolated child
    (posttrain.rewards.isolated) for the user's own code, which never runs in the server."""
    if reward.judged:
        reward.refuse_unpriced("evaluate")
    if not isinstance(reward, UserReward):
        scored = [score_rows(reward, completions, rows) for completions in passes]
        ungraded = sum(s.rewards.count(None) for s in scored)
        if ungraded:  # a judge: its metric over the graded tasks alone is not built yet
            raise RewardError(
                f"the judge could not grade {ungraded} of {sum(map(len, scored))} answers; "
                f"evaluate needs every answer graded (leaving ungraded tasks out is not built "
                f"yet): check the judge with `posttrain reward check judge`"
            )
        return scored
    return score(reward, spec.reward.name, dict(spec.reward.params or {}), passes, rows)


def _pairs(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out preference pairs, as the trainer rendered them (prompt, chosen, rejected
    as messages, tools where the row has them)."""
    missing = [t.get("id") for t in tasks if not t.get("chosen") or not t.get("rejected")]
    if missing:
        raise ConfigError(
            f"{len(missing)} held-out rows of this DPO run have no chosen and rejected answers "
            f"(e.g. {missing[:3]}): its holdout was written before DPO was built; launch it again"
        )
    return [{k: t[k] for k in ("prompt", "chosen", "rejected", "tools") if k in t} for t in tasks]


def _feedback(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out rows of a KTO run, as the trainer rendered them (prompt and answer as
    messages, the rater's verdict, tools where the row has them)."""
    unread = [t.get("id") for t in tasks if not isinstance(t.get("label"), bool)]
    if unread:
        raise ConfigError(
            f"{len(unread)} held-out rows of this KTO run have no readable label (e.g. "
            f"{unread[:3]}): `posttrain data check` names them; fix them and launch again"
        )
    keys = ("prompt", "completion", "label", "tools")
    return [{k: t[k] for k in keys if k in t} for t in tasks]


def _preference_metrics(
    outs: list[dict[str, Any]],
) -> tuple[MetricResult, MetricResult] | None:
    """Held-out preference accuracy (the share of pairs whose chosen answer the model finds
    likelier than the rejected one, summed over tokens as DPO compares them) and the mean
    margin, base against trained, paired by pair. Deterministic, like reference_nll: the base
    passes agree, and the tasks and the seeds' spread are the uncertainty."""
    if any(o.get("margins") is None for o in outs):
        return None
    base0 = outs[0]["margins"]["base"]

    def of(values: list[float], accuracy: bool) -> list[list[float]]:
        return [[float(v > 0) if accuracy else float(v)] for v in values]

    def metric(name: str, accuracy: bool, optimised: bool) -> MetricResult:
        bases = [of(o["margins"]["base"] or base0, accuracy) for o in outs]
        return metric_result(
            name,
            [bases[0], bases[0]],
            bases,
            [of(o["margins"]["trained"], accuracy) for o in outs],
            optimised=optimised,
        )

    return (
        metric("preference_accuracy", True, True),
        metric("preference_margin", False, False),
    )


def _nll_metric(outs: list[dict[str, Any]]) -> MetricResult | None:
    """reference_nll from each seed's arms: deterministic, so its base "passes" agree and its
    base passes agree; tasks without a reference are left out."""
    if any(o.get("nll") is None for o in outs):
        return None
    base0 = outs[0]["nll"]["base"]
    keep = [i for i, v in enumerate(base0) if v is not None]
    if len(keep) < stats.MIN_TASKS_ANY:
        return None

    def tasks_of(values: list[float | None]) -> list[list[float]]:
        return [[float(values[i])] for i in keep]  # type: ignore[arg-type]

    bases = [tasks_of(o["nll"]["base"] if o["nll"]["base"] is not None else base0) for o in outs]
    return metric_result(
        "reference_nll",
        [bases[0], bases[0]],
        bases,
        [tasks_of(o["nll"]["trained"]) for o in outs],
        optimised=False,
        higher_is_better=False,
    )
