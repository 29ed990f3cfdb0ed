"""An evaluation is resolved once into an EvalPlan: what the id names (a run, a group's seeds,
an experiment's arms x seeds), its runs and arms, one price, and the judge; the plan crosses
into the detached job as one document, and the same request is still the same job. The runs
here are finished folders written by hand: nothing trains."""

import inspect
import json
import time
from pathlib import Path

import pytest

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.jobs.detached import JOB, jobs_root
from posttrain.launching.resolve_eval import resolve_evaluation
from posttrain.models.container import container_for_model, worst_case_s
from posttrain.pricing.eval_cost import EVAL_TIMEOUT_S
from posttrain.runs.backend import Backend
from posttrain.runs.context import Context
from posttrain.runs.layout import HOLDOUT, EventWriter, write_json_atomic
from posttrain.runs.local import LocalBackend
from posttrain.runs.modal_backend import ModalBackend
from posttrain.spec.eval_plan import EvalPlan
from posttrain.spec.schema import load_spec
from posttrain.tools import evaluate as verb
from tests.specs import EVAL_RUN, PAID

GROUP = "grp-260101-000000-beef"
EXPERIMENT = "exp-260101-000000-cafe"


def finished(root: Path, run_id: str, spec: dict, status: str = "succeeded", **meta) -> None:
    """A run folder as a launch leaves it once its trainer ended."""
    folder = root / run_id
    write_json_atomic(
        folder / "run.json",
        {"run_id": run_id, "backend": "local", "created_at": time.time(), **meta},
    )
    (folder / "spec.json").write_text(load_spec(spec).to_json(), encoding="utf-8")
    (folder / "final").mkdir()
    rows = [{"id": str(i), "prompt": [{"role": "user", "content": f"task {i}"}]} for i in range(40)]
    (folder / HOLDOUT).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    events = EventWriter(folder)
    events.write("result", status=status, final={})
    events.close()


def run_id(n: int) -> str:
    return f"run-260101-000000-{n:04x}"


def test_a_run_id_names_one_free_run_on_this_machine(home):
    ctx = Context()
    finished(ctx.root, run_id(1), EVAL_RUN)
    plan = resolve_evaluation(run_id(1), ctx, k=2, max_tasks=20)
    assert (plan.names, [r.run_id for r in plan.runs]) == ("run", [run_id(1)])
    assert plan.runs[0].backend == "local" and plan.runs[0].gpu is None
    assert plan.runs[0].arm is None and plan.arms() == {"": plan.runs}
    assert (plan.cost.worst_case_usd, plan.cost.expected_usd, plan.cost.gpu) == (0.0, 0.0, None)
    assert plan.judge is None and plan.cost.judge is None
    assert verb.eval_question(plan) is None  # free: nobody is asked


def test_a_group_id_names_its_seeds_in_seed_order(home):
    ctx = Context()
    for n, seed in ((2, 1), (3, 0)):
        finished(ctx.root, run_id(n), EVAL_RUN, group_id=GROUP, seed=seed)
    plan = resolve_evaluation(GROUP, ctx)
    assert plan.names == "group" and plan.metric is None
    assert [r.run_id for r in plan.runs] == [run_id(3), run_id(2)]  # seed 0, then seed 1
    assert plan.cost.worst_case_usd == 0.0


def test_an_experiment_id_names_its_arms_and_is_priced_once_for_every_run(home, monkeypatch):
    """On Modal: each run's container for the whole window, summed once; the failed run is
    neither priced nor evaluated, only named."""
    ctx = Context()
    spec = {**PAID, "compute": {"backend": "modal", "gpu": "A10", "timeout_s": 3600}}
    metric = {"name": "reward", "goal": "maximize"}
    arms = [("lr=0.1", {"learning_rate": 0.1}), ("lr=0.2", {"learning_rate": 0.2})]
    n = 10
    for arm_index, (arm, overrides) in enumerate(arms):
        for seed in (1, 0):
            n += 1
            status = "failed" if (arm_index, seed) == (1, 1) else "succeeded"
            finished(
                ctx.root,
                run_id(n),
                spec,
                status,
                backend="modal",
                gpu="A10",
                group_id=EXPERIMENT,
                seed=seed,
                arm=arm,
                arm_index=arm_index,
                overrides=overrides,
                metric=metric,
            )
    plan = resolve_evaluation(EXPERIMENT, ctx, k=2, base_passes=2, max_tasks=20)
    assert plan.names == "experiment" and plan.metric == metric
    assert [(r.arm, r.run_id) for r in plan.runs] == [
        ("lr=0.1", run_id(12)),
        ("lr=0.1", run_id(11)),
        ("lr=0.2", run_id(14)),
    ]
    assert {a: [r.overrides for r in rs] for a, rs in plan.arms().items()} == {
        "lr=0.1": [{"learning_rate": 0.1}] * 2,
        "lr=0.2": [{"learning_rate": 0.2}],
    }
    assert plan.skipped == [f"{run_id(13)} (failed)"]
    container = container_for_model("A10", 1, "Qwen3-0.6B")
    one = worst_case_s(EVAL_TIMEOUT_S) * container.usd_per_s
    assert plan.cost.worst_case_usd == round(3 * one, 2) == plan.cost.gpu_worst_case_usd
    assert plan.cost.expected_usd is None  # a GPU's evaluation time is not modelled
    assert (plan.cost.gpu, plan.cost.timeout_s) == ("A10", EVAL_TIMEOUT_S)
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "0")
    asked = verb.eval_question(plan)
    assert asked is not None
    assert f"the 3 runs of experiment {EXPERIMENT} on Modal (A10" in asked
    assert f"at most ${plan.cost.worst_case_usd:.2f}?" in asked


@pytest.mark.parametrize(
    ("asked", "error", "said"),
    [
        (run_id(0xDEAD), NotFoundError, f"no run '{run_id(0xDEAD)}'"),
        ("grp-260101-000000-0000", ConfigError, "no group 'grp-260101-000000-0000'"),
        ("exp-260101-000000-0000", ConfigError, "no experiment 'exp-260101-000000-0000'"),
    ],
)
def test_an_unknown_id_is_a_clear_error_naming_it(home, asked, error, said):
    with pytest.raises(error, match=said):
        resolve_evaluation(asked, Context())


def test_a_run_that_has_not_succeeded_is_refused_by_name(home):
    ctx = Context()
    finished(ctx.root, run_id(5), EVAL_RUN, status="failed")
    with pytest.raises(ConfigError, match=f"run {run_id(5)} is failed"):
        resolve_evaluation(run_id(5), ctx)
    with pytest.raises(ConfigError, match=r"k must be 1\.\.64"):
        resolve_evaluation(run_id(5), ctx, k=0)


def test_the_plan_crosses_into_the_job_as_one_document_and_the_same_request_is_the_same_job(
    home, monkeypatch
):
    spawned = []
    monkeypatch.setattr("posttrain.jobs.detached._spawn", spawned.append)  # no worker runs
    ctx = Context()
    finished(ctx.root, run_id(6), EVAL_RUN)
    first = verb.start_evaluate(run_id(6), k=1, base_passes=2, max_tasks=20, ctx=ctx)
    assert first.status == "started" and len(spawned) == 1
    job = json.loads((jobs_root() / first.job_id / JOB).read_text())
    plan = EvalPlan.model_validate(job["extra"]["plan"])
    assert plan.approved_by == "free" and plan.runs[0].run_id == run_id(6)
    assert plan == EvalPlan.model_validate(json.loads(json.dumps(plan.model_dump(mode="json"))))
    assert job["args"] == plan.request()  # the request alone is the job's key
    again = verb.start_evaluate(run_id(6), k=1, base_passes=2, max_tasks=20, ctx=ctx)
    assert again.job_id == first.job_id and len(spawned) == 1
    other = verb.start_evaluate(run_id(6), k=2, base_passes=2, max_tasks=20, ctx=ctx)
    assert other.job_id != first.job_id


def test_every_backend_implements_the_protocol_with_its_signature():
    """A method the protocol names is on each backend with the same parameters (generator
    included: evaluate calls it on whichever backend trained the run)."""
    wanted = {
        name: list(inspect.signature(fn).parameters)
        for name, fn in vars(Backend).items()
        if inspect.isfunction(fn) and not name.startswith("_")
    }
    assert "generator" in wanted
    for backend in (LocalBackend, ModalBackend):
        got = {name: list(inspect.signature(getattr(backend, name)).parameters) for name in wanted}
        assert got == wanted, backend.__name__
