"""evaluate: is the trained model better than its base, on held-out tasks, beyond the noise?

One code path for both arms (posttrain.gpu.arms.generate_job): the base passes run first
(three seeds by default, which measure the evaluation's own noise), then the adapter is
attached and the trained pass runs with base pass 1's seed on the same tasks. Each task gets
k samples. Every metric gets the one comparison (posttrain.evals.paired): the delta over
paired tasks, its interval holding samples, passes and seeds, and a verdict; the training
reward's verdict is the headline, and a metric the training did not optimise (answer length,
relevance) is reported beside it.
Results are stored with the run (evaluations/*.json and an `evaluation` event).
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError, RewardError
from posttrain.evals import stats
from posttrain.evals.decontam import decontaminate
from posttrain.evals.episode_metrics import (
    DEFAULT_THRESHOLD,
    DESCRIBED,
    LOWER_IS_BETTER,
    OPTIMISED,
    episode_metrics,
    example_text,
)
from posttrain.evals.kto_metrics import feedback_metrics
from posttrain.evals.metrics import (
    DIRECTIONLESS,
    MetricResult,
    metric_result,
    per_sample_metrics,
    qualified,
    regressions,
)
from posttrain.evals.planning import planned_tasks
from posttrain.rewards.base import Scores
from posttrain.rewards.guards import score_rows
from posttrain.rewards.isolated import score_in_subprocess
from posttrain.rewards.judge.metric import METRIC as JUDGE_METRIC
from posttrain.rewards.judge.metric import evaluation_judge, metric_judge, same_judge
from posttrain.rewards.registry import get_reward
from posttrain.rewards.user import UserReward
from posttrain.runs.layout import HOLDOUT, SPEC, EventWriter, write_json_atomic
from posttrain.spec.schema import load_spec

EXAMPLES = 3


class PassRates(BaseModel):
    threshold: float
    k: int
    base: dict[str, float]
    trained: dict[str, float]


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
    k: int
    base_passes: int
    seeds: dict[str, Any]
    metrics: list[MetricResult] = Field(description="What the training reward pays.")
    unoptimised: list[MetricResult] = Field(
        default_factory=list,
        description="What it does not: reference_nll (did training destroy what the model "
        "knew?) and answer length.",
    )
    pass_rates: PassRates | None = Field(
        None, description="Share of tasks whose samples reach the threshold (None: no reward)."
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


def _load_rows(path: Path) -> list[dict[str, Any]]:
    import json

    if not path.is_file():
        raise ConfigError(f"{path} is missing: the run kept no held-out rows (holdout_share 0?)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


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
    holdout = _load_rows(first / HOLDOUT)
    warnings: list[str] = []
    second = _second_judge(judge, spec, reward, warnings, judge_approved)
    try:
        train_rows = algorithm_of(spec).prepare(spec.dataset).train
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
    episodic = spec.environment is not None  # whole episodes, scored where they were played
    if threshold is None and spec.eval is not None:
        threshold = spec.eval.pass_threshold
    if episodic:
        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    if (
        not episodic
        and reward is None
        and sum(bool(t.get("reference")) for t in tasks) < stats.MIN_TASKS_ANY
    ):
        raise ConfigError(
            f"the spec names no reward and fewer than {stats.MIN_TASKS_ANY} held-out tasks have "
            f"a reference, so there is nothing to measure; give the spec a reward (e.g. "
            f"tool_call) or a dataset.reference_column"
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
            seed=seed,
            optimised=optimised,
            higher_is_better=higher,
        )

    if episodic:
        metrics = [result(name) for name in OPTIMISED]
        unoptimised = [result(n, False, higher=False) for n in LOWER_IS_BETTER]
        unoptimised += [result(n, optimised=False) for n in DESCRIBED]
    else:
        names = [n for n in trained_by_seed[0] if n not in DIRECTIONLESS]
        metrics = [result(name) for name in names]
        unoptimised = [result(name, optimised=False) for name in DIRECTIONLESS]
        if second is not None and (judge_result := _judge_result(result, passes, warnings)):
            unoptimised.insert(0, judge_result)
    nll = _nll_metric(outs, seed)
    preference = _preference_metrics(outs, seed)
    labels = [bool(t["label"]) for t in tasks] if any(o.get("logliks") for o in outs) else []
    feedback = feedback_metrics(outs, labels, seed) if labels else None
    if preference is not None:  # DPO: does the model prefer the held-out chosen answers?
        accuracy, margin = preference
        metrics = [accuracy]
        unoptimised = [margin, *([nll] if nll is not None else []), *unoptimised]
    elif feedback is not None:  # KTO: 👍 answers likelier, 👎 ones less likely, paired by row
        metrics = [feedback[0]]
        unoptimised = [*feedback[1:], *([nll] if nll is not None else []), *unoptimised]
    elif reward is None and not episodic:
        if nll is None:
            raise ConfigError(
                "the spec names no reward and the references' likelihood could not be measured "
                "on enough tasks; give the spec a reward (e.g. tool_call)"
            )
        metrics = [nll.model_copy(update={"optimised": True})]  # what SFT optimises
    elif nll is not None:
        unoptimised.insert(0, nll)
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
        rates = _by_reward(base_by_seed[0], trained_by_seed[0], threshold, k)
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
    return EvalResult(
        run_id=group_id or first.name,
        runs=[d.name for d in run_dirs],
        training_seeds=len(run_dirs),
        created_at=time.time(),
        verdict=qualified(headline.verdict, regressions(unoptimised)),
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


def pass_threshold(
    reward: Any,
    passes: list[dict[str, list[list[float]]]],
    trained: list[dict[str, list[list[float]]]],
    given: float | None,
) -> tuple[float | None, str]:
    """The reward a sample must reach to pass, and why: the user's (--threshold, or the spec's
    eval.pass_threshold); 1 for a reward whose every score is 0 or 1; half the range of a
    reward that declares one; else none (a threshold guessed from the scores, such as their
    median, would say nothing: pass rates of 1.00 beside a mean reward of 0.05)."""
    if given is not None:
        return given, "the threshold given"
    every = [v for p in [*passes, *trained] for task in p["reward"] for v in task]
    if every and all(v in (0.0, 1.0) for v in every):
        return 1.0, "a 0/1 reward passes at 1"
    low, top = reward.value_range if reward is not None else (-math.inf, math.inf)
    if math.isfinite(low) and math.isfinite(top):
        return low + 0.5 * (top - low), "half the reward's declared range"
    return None, (
        f"reward '{getattr(reward, 'name', reward)}' declares no range and its scores are not "
        f"all 0 or 1, so no threshold means 'passed'; give one (evaluate --threshold, the "
        f"spec's eval.pass_threshold, or the reward's params.value_range)"
    )


def _by_reward(
    base: dict[str, list[list[float]]],
    trained: dict[str, list[list[float]]],
    threshold: float | None,
    k: int,
) -> PassRates | None:
    """Pass rates at the threshold (None: not reported)."""
    if threshold is None:
        return None
    return pass_rates(base["reward"], trained["reward"], threshold, k)


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
    answers = score_in_subprocess(
        spec.reward.name, dict(spec.reward.params or {}), [(p, rows) for p in passes]
    )
    return [Scores(rewards=a["rewards"], components=a["components"]) for a in answers]


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
    outs: list[dict[str, Any]], seed: int
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
            seed=seed,
            optimised=optimised,
        )

    return (
        metric("preference_accuracy", True, True),
        metric("preference_margin", False, False),
    )


def _nll_metric(outs: list[dict[str, Any]], seed: int) -> MetricResult | None:
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
        seed=seed,
        optimised=False,
        higher_is_better=False,
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
