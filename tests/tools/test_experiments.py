"""Experiments: a spec's `sweep:` planned arm by arm, approved once for the total, refused
before anything starts when one arm is invalid, and one experiment however many processes
launch it with one key. Paid launches go to a double of the backend (nothing trains)."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from posttrain.core.errors import BudgetError, ConfigError
from posttrain.runs.context import Context
from posttrain.runs.layout import RUN_META, read_json
from posttrain.tools.launch import human_question, launch, smoke_run
from posttrain.tools.plan import plan
from posttrain.tools.runs import cancel_run, get_run, list_runs
from tests.conftest import ROOT, kill_leftover_runs, wait_finished
from tests.doubles import PaidBackendDouble
from tests.specs import PAID, tiny

SWEEP = {"algorithm.learning_rate": [1e-5, 5e-5], "seeds": [0, 1]}
EXPERIMENT = {**PAID, "sweep": SWEEP}


def spend(home) -> dict[str, float]:
    path = home / "budget.sqlite"
    if not path.exists():
        return {}
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT run_id, reserved_usd FROM spend"))


def started_runs(home) -> list:
    runs = home / "runs"
    return sorted(runs.iterdir()) if runs.is_dir() else []


def test_plan_prices_every_arm_and_the_total_is_the_sum_of_their_runs(home):
    one = plan(PAID).cost.worst_case_usd  # $2.52 on an L40S: both rates cost the same
    result = plan(EXPERIMENT)
    e = result.experiment
    assert [a.name for a in e.arms] == ["learning_rate=1e-05", "learning_rate=5e-05"]
    assert e.runs == 4 and e.seeds == [0, 1]
    assert [a.cost.worst_case_usd for a in e.arms] == [round(2 * one, 2)] * 2
    assert result.cost.worst_case_usd == round(4 * one, 2)
    assert result.cost.expected_usd == pytest.approx(sum(a.cost.expected_usd for a in e.arms))
    assert e.arms[0].overrides == {"algorithm.learning_rate": 1e-5}
    assert "side by side" in e.parallel  # modal: the arms do not queue


def test_one_question_for_the_whole_experiment_and_its_runs_name_their_arm(home):
    backend = PaidBackendDouble()
    ctx = Context(backends={"modal": backend})
    asked = human_question(EXPERIMENT, ctx=ctx)
    assert asked.startswith("Launch an experiment of 2 arms x 2 seeds = 4 runs of Qwen3-0.6B")
    assert "learning_rate=1e-05; learning_rate=5e-05" in asked
    result = launch(EXPERIMENT, human="approved", ctx=ctx)
    assert result.status == "started" and result.group_id.startswith("exp-")
    assert len(result.run_ids) == 4 and len(backend.started) == 4
    assert result.arms == ["learning_rate=1e-05"] * 2 + ["learning_rate=5e-05"] * 2
    meta = read_json(home / "runs" / result.run_ids[3] / RUN_META)
    assert meta["arm"] == "learning_rate=5e-05" and meta["seed"] == 1
    assert meta["overrides"] == {"algorithm.learning_rate": 5e-5}
    detail = get_run(result.run_ids[3], ctx=ctx)
    assert (detail.group_id, detail.arm, detail.seed) == (result.group_id, meta["arm"], 1)
    listed = {r.run_id: r.arm for r in list_runs(ctx=ctx)}
    assert listed[result.run_ids[0]] == "learning_rate=1e-05"
    assert sum(spend(home).values()) == pytest.approx(result.cost.worst_case_usd)
    again = launch(EXPERIMENT, human="approved", ctx=ctx)  # the same experiment: its key
    assert again.status == "existing" and again.run_ids == result.run_ids
    assert len(backend.started) == 4


@pytest.mark.parametrize(
    ("sweep", "says"),
    [
        ({"algorithm.learnin_rate": [1e-5]}, r"did you mean 'algorithm\.learning_rate'"),
        (
            {"algorithm.learning_rate": [1e-5, 7.0]},
            r"sweep arm 'learning_rate=7' \(algorithm\.learning_rate=7\.0\): spec field "
            r"'algorithm\.learning_rate'",
        ),
        ({"model": ["Qwen3-0.6B", "Qwen9-99B"]}, "sweep arm 'model=Qwen9-99B'"),
    ],
)
def test_an_invalid_arm_is_refused_by_name_and_nothing_is_reserved(home, sweep, says):
    ctx = Context(backends={"modal": PaidBackendDouble()})
    spec = {**PAID, "sweep": sweep}
    with pytest.raises(ConfigError, match=says):
        plan(spec)
    with pytest.raises(ConfigError, match=says):
        launch(spec, human="approved", ctx=ctx)
    assert started_runs(home) == [] and spend(home) == {}


def test_a_total_over_the_run_cap_is_refused_for_the_experiment_as_a_whole(home, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MAX_DAY_USD", "5")  # one run $2.52; four runs $10.08
    ctx = Context(backends={"modal": PaidBackendDouble()})
    assert any("the experiment's total" in w for w in plan(EXPERIMENT).warnings)
    with pytest.raises(BudgetError, match=r"worst case \$10\.08 would pass the daily cap"):
        launch(EXPERIMENT, human="approved", ctx=ctx)
    assert started_runs(home) == [] and spend(home) == {}


TINY_EXPERIMENT = {**tiny(), "sweep": {"algorithm.learning_rate": [1e-3, 0.0], "seeds": [0, 1]}}


@pytest.mark.slow
def test_an_experiments_dry_run_proves_each_distinct_spec_its_arms_make_once(home):
    ctx = Context()
    rates = smoke_run(TINY_EXPERIMENT, steps=1, ctx=ctx)  # the rate is cut by a dry run anyway
    assert rates.status == "started" and len(rates.run_ids) == 1
    rewards = {**TINY_EXPERIMENT, "sweep": {"reward": ["rhyme", "rhyme_relevance"]}}
    both = smoke_run(rewards, steps=1, ctx=ctx)  # a reward change must be proven on its own
    assert both.arms == ["reward=rhyme", "reward=rhyme_relevance"] and len(both.run_ids) == 2
    try:
        for run_id in rates.run_ids + both.run_ids:
            assert wait_finished(run_id, 300, ctx=ctx).status == "succeeded"
    finally:
        kill_leftover_runs(home)
    specs = [read_json(home / "runs" / r / "spec.json") for r in both.run_ids]
    assert [s["reward"]["name"] for s in specs] == ["rhyme", "rhyme_relevance"]
    assert all(s["algorithm"]["steps"] == 2 for s in specs)  # a proof step and one more


@pytest.mark.slow
def test_cancelling_an_experiment_stops_every_run_the_queued_first(home):
    ctx = Context()
    started = launch(
        {**TINY_EXPERIMENT, "algorithm": {**tiny()["algorithm"], "steps": 400}}, ctx=ctx
    )
    try:
        assert len(started.run_ids) == 4  # one trains, three queue (one trainer at a time)
        result = cancel_run(started.group_id, grace_s=10, ctx=ctx)
    finally:
        kill_leftover_runs(home)
    assert result.stopped and [c.run_id for c in result.runs] == started.run_ids
    assert {c.status for c in result.runs} == {"cancelled"} and result.status == "cancelled"
    later = {r.run_id: r.status for r in list_runs(ctx=ctx)}
    assert all(later[r] == "cancelled" for r in started.run_ids)  # none started after


@pytest.mark.slow
def test_launching_an_experiment_again_keeps_its_finished_runs_and_restarts_the_cancelled(home):
    ctx = Context()
    first = launch(TINY_EXPERIMENT, ctx=ctx)
    kept, lost = first.run_ids[:2], first.run_ids[2:]  # the second arm's runs, still queued
    try:
        for run_id in lost:  # one trainer at a time: these wait behind the first arm's two
            assert cancel_run(run_id, grace_s=10, ctx=ctx).status == "cancelled"
        for run_id in kept:
            assert wait_finished(run_id, 300, ctx=ctx).status == "succeeded"
        again = launch(TINY_EXPERIMENT, ctx=ctx)
        assert again.status == "started" and again.group_id == first.group_id
        assert len(again.run_ids) == 2 and not set(again.run_ids) & set(first.run_ids)
        assert "2 run(s) that failed or were cancelled started again" in again.message
        assert "(learning_rate=0), 2 kept" in again.message
        for run_id in again.run_ids:
            assert wait_finished(run_id, 300, ctx=ctx).status == "succeeded"
    finally:
        kill_leftover_runs(home)
    metas = [read_json(home / "runs" / r / RUN_META) for r in [*kept, *again.run_ids]]
    assert sorted((m["arm"], m["seed"]) for m in metas) == sorted(
        (arm, seed) for arm in ("learning_rate=0.001", "learning_rate=0") for seed in (0, 1)
    )
    assert {m["group_id"] for m in metas} == {first.group_id}
    third = launch(TINY_EXPERIMENT, ctx=ctx)  # every arm x seed has a run that succeeded
    assert third.status == "existing" and third.group_id == first.group_id
    assert "each of its arm x seed runs succeeded or is live" in third.message


USER_REWARD = """
import re
def score(completions, total, **kw):
    out = []
    for c, t in zip(completions, total):
        found = re.findall(r"-?\\d+", c if isinstance(c, str) else c[-1]["content"])
        out.append(1.0 if found and found[-1] == t else 0.0)
    return out
"""


@pytest.mark.slow
def test_an_experiment_as_a_user_writes_it_plans_dry_runs_and_launches(home, tmp_path, monkeypatch):
    """A real preset, the user's own file and column names (unicode in them), their reward
    file, LoRA ranks swept: priced per arm, dry-run once per distinct spec, one approval."""
    monkeypatch.chdir(tmp_path)
    with open("sommes.jsonl", "w", encoding="utf-8") as f:
        for a in range(2, 42):
            f.write(
                json.dumps({"énoncé": f"Combien font {a} + {a + 3} ? ✓", "total": str(2 * a + 3)})
                + "\n"
            )
    (tmp_path / "juste.py").write_text(USER_REWARD)
    spec = {
        "model": "Qwen3-0.6B",
        "dataset": {
            "path": "sommes.jsonl",
            "prompt_template": "{énoncé}",
            "reference_column": "total",
            "holdout_share": 0.1,
        },
        "reward": "juste.py:score",
        "algorithm": {"steps": 50, "batch_size": 8, "num_generations": 4, "lora": {"r": 8}},
        "compute": {"backend": "modal", "timeout_s": 1800},
        "sweep": {"lora.r": [8, 32], "algorithm.learning_rate": [1e-5, 5e-5], "seeds": [0]},
    }
    planned = plan(spec)
    assert [a.name for a in planned.experiment.arms] == [
        "r=8,learning_rate=1e-05",
        "r=8,learning_rate=5e-05",
        "r=32,learning_rate=1e-05",
        "r=32,learning_rate=5e-05",
    ]
    assert planned.cost.worst_case_usd == pytest.approx(
        sum(a.cost.worst_case_usd for a in planned.experiment.arms)
    )
    dry = smoke_run(spec, steps=1, ctx=Context())  # local: the stand-in, free
    assert len(dry.run_ids) == 2  # the rate is cut by a dry run; the rank is not
    try:
        for run_id in dry.run_ids:
            assert wait_finished(run_id, 600).status == "succeeded"
    finally:
        kill_leftover_runs(home)
    backend = PaidBackendDouble()
    started = launch(spec, human="approved", ctx=Context(backends={"modal": backend}))
    assert started.status == "started" and len(backend.started) == 4
    lora = [
        read_json(home / "runs" / r / "spec.json")["algorithm"]["lora"]["r"]
        for r in started.run_ids
    ]
    assert lora == [8, 8, 32, 32]


RACER = """
import json, sys
sys.path.insert(0, {root!r})
from posttrain.runs.context import Context
from posttrain.tools.launch import launch
from tests.doubles import PaidBackendDouble
ctx = Context(backends={{"modal": PaidBackendDouble(delay_s=0.3)}})
result = launch(json.loads(sys.argv[1]), idempotency_key="one-experiment", ctx=ctx)
print(json.dumps([result.status, result.group_id, result.run_ids]))
"""


@pytest.mark.slow
def test_four_processes_launching_one_experiment_with_one_key_start_one(
    home, tmp_path, monkeypatch
):
    monkeypatch.setenv("POSTTRAIN_AUTO_APPROVE_USD", "11")  # the policy approves the $10.08
    script = tmp_path / "racer.py"
    script.write_text(RACER.format(root=str(ROOT)))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), json.dumps(EXPERIMENT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert sorted(s for s, _, _ in results) == ["existing", "existing", "existing", "started"]
    assert len({g for _, g, _ in results}) == 1  # all four name the same experiment
    assert len({tuple(r) for _, _, r in results}) == 1
    assert len(started_runs(home)) == 4 and len(spend(home)) == 4


@pytest.mark.slow
def test_four_cli_launches_of_one_experiment_at_once_start_it_once(home, tmp_path):
    import yaml

    spec = tmp_path / "experiment.yaml"
    spec.write_text(
        yaml.safe_dump({**TINY_EXPERIMENT, "algorithm": {**tiny()["algorithm"], "steps": 400}})
    )
    env = {**os.environ, "POSTTRAIN_HOME": str(home)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "posttrain.cli", "launch", str(spec), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    try:
        results = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
        assert sorted(r["status"] for r in results) == ["existing"] * 3 + ["started"]
        assert len({r["group_id"] for r in results}) == 1
        assert len({tuple(r["run_ids"]) for r in results}) == 1 and len(results[0]["run_ids"]) == 4
        assert len(started_runs(home)) == 4
        assert cancel_run(results[0]["group_id"], grace_s=10).stopped
    finally:
        kill_leftover_runs(home)
