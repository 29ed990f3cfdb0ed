"""evaluate on the user's terms: their own held-out file (eval.path), decontaminated against
the training rows with the overlap reported, and the rewards they name (eval.metrics) scored as
metrics on every pass, for an SFT run that has no reward of its own. The models' answers are
scripted here (the real tiny run is in tests/evals/test_eval_terms_run.py); the reading, the
decontamination, the reward and the statistics are the real ones."""

import json
import os
import random

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.data import gym
from posttrain.data.demo_specs import TOOL_SYSTEM_PROMPT, tool_rows
from posttrain.evals.evaluation import evaluate_run
from posttrain.spec.schema import load_spec

ROWS = tool_rows(480)
TRAIN, HELD = ROWS[:200], ROWS[200:260]


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return str(path)


def sft_spec(train: str, **eval_fields) -> dict:
    return {
        "model": "tiny-local",
        "dataset": {
            "path": train,
            "system_prompt": TOOL_SYSTEM_PROMPT,
            "response_column": "answer",
            "reference_column": "answer",
            "holdout_share": 0.05,
        },
        "algorithm": {"kind": "sft", "steps": 5},
        "eval": eval_fields,
    }


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The user's folder: training rows, a held-out file with two rows that training saw (one
    by its id, one by its text under a new id), and a run directory of an SFT spec."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    seen_by_text = {**TRAIN[7], "id": "held-new-id"}
    write(tmp_path / "train.jsonl", TRAIN)
    write(tmp_path / "held.jsonl", [*HELD, TRAIN[3], seen_by_text])
    return tmp_path


def run_dir(root, spec: dict):
    run = root / "run-test-0001"
    run.mkdir(exist_ok=True)
    validated = load_spec(spec)
    (run / "spec.json").write_text(validated.to_json())
    held = algorithm_of(validated).prepare(validated.dataset).holdout  # as the trainer keeps it
    (run / "holdout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
    return run


def answering(trained_right: bool, seen: list | None = None):
    """generate(job): one arm answers each task's expected call, the other prose; the trained
    arm's references are likelier (reference_nll falls) either way."""

    def generate(job):
        if seen is not None:
            seen.append(job)
        n, k = len(job["prompts"]), job["k"]
        right = [[job["references"][i]] * k for i in range(n)]
        wrong = [["I would look that up for you."] * k for _ in range(n)]
        base, trained = (wrong, right) if trained_right else (right, wrong)
        return {
            "base": [base for _ in job["base_seeds"]],
            "trained": trained,
            "nll": {"base": [2.0 + 0.01 * i for i in range(n)], "trained": [1.0] * n},
        }

    return generate


def test_an_sft_run_is_measured_on_the_users_file_by_the_metric_they_named(project):
    run = run_dir(project, sft_spec("train.jsonl", path="held.jsonl", metrics=["tool_call"]))
    jobs: list = []
    result = evaluate_run(run, answering(True, jobs), k=2, max_tasks=100)
    # the user's file, not the run's own held-out rows, and what training had seen is out
    held = result.held_out
    assert (held.source, held.path, held.rows) == ("eval.path", "held.jsonl", 62)
    assert held.dropped["same_id"] == 1 and held.dropped["same_text"] == 1
    assert {TRAIN[3]["prompt"], TRAIN[7]["prompt"]} <= set(held.examples)
    assert result.tasks_used == held.clean <= 60 and result.tasks_total == 62
    asked = [m[-1]["content"] for m in jobs[0]["prompts"]]
    assert set(asked) <= {r["prompt"] for r in HELD} and len(asked) == result.tasks_used
    assert jobs[0]["prompts"][0][0] == {"role": "system", "content": TOOL_SYSTEM_PROMPT}
    assert any("dropped 2 of 62 tasks of eval.path 'held.jsonl'" in w for w in result.warnings)
    # SFT's headline stays what it optimised; the named metric is reported beside it
    assert result.metrics[0].name == "reference_nll" and result.metrics[0].optimised
    named = {m.name: m for m in result.unoptimised}["tool_call"]
    assert [m.name for m in result.unoptimised] == ["tool_call", "length_words"]
    assert not named.optimised and named.higher_is_better
    assert (named.base_mean, named.trained_mean) == (0.0, 1.0)
    assert named.verdict.startswith(("improved", "unproven: improved"))
    assert "worse" not in result.verdict
    assert result.examples[0]["metrics"] == {"tool_call": [0.0, 1.0]}  # beside each example


def test_a_named_metric_worse_beyond_noise_qualifies_the_headline(project):
    run = run_dir(project, sft_spec("train.jsonl", path="held.jsonl", metrics=["tool_call"]))
    result = evaluate_run(run, answering(False), k=2, max_tasks=100)
    named = {m.name: m for m in result.unoptimised}["tool_call"]
    assert (named.base_mean, named.trained_mean) == (1.0, 0.0)
    assert "tool_call worse beyond noise" in result.verdict  # the likelihood improved alone


def test_without_references_the_first_named_metric_is_the_headline_and_says_so(project):
    spec = sft_spec("train.jsonl", path="held.jsonl", metrics=["tool_call"])
    run = run_dir(project, spec)

    def no_likelihood(job):
        out = answering(True)(job)
        out["nll"] = None  # nothing to measure the references' likelihood by
        return out

    result = evaluate_run(run, no_likelihood, k=2, max_tasks=100)
    assert result.metrics[0].name == "tool_call" and not result.metrics[0].optimised
    assert any(
        w.startswith("the headline is eval.metrics' first, tool_call") for w in result.warnings
    )


def test_a_users_metric_file_is_scored_in_a_child_never_in_the_caller(project):
    pids = project / "pids.txt"
    (project / "mine.py").write_text(
        "import os\n"
        f"open({str(pids)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "def starts_a_call(completions, **kw):\n"
        "    return [float(str(c).startswith('<tool_call>')) for c in completions]\n",
        encoding="utf-8",
    )
    spec = sft_spec("train.jsonl", path="held.jsonl", metrics=["mine.py:starts_a_call"])
    result = evaluate_run(run_dir(project, spec), answering(True), k=1, max_tasks=100)
    named = {m.name: m for m in result.unoptimised}["starts_a_call"]
    assert (named.base_mean, named.trained_mean) == (0.0, 1.0)
    assert str(os.getpid()) not in pids.read_text().split()  # only children imported it


def never(job):
    raise AssertionError("nothing may be generated")


def test_a_metric_reading_a_column_the_file_lacks_is_refused_before_anything_runs(project):
    metric = {"name": "tool_call", "params": {"label_column": "expected"}}
    run = run_dir(project, sft_spec("train.jsonl", path="held.jsonl", metrics=[metric]))
    with pytest.raises(ConfigError) as refused:
        evaluate_run(run, never, k=1, max_tasks=100)
    said = str(refused.value)
    assert "eval.metrics[0] (tool_call) reads column(s) ['expected']" in said
    assert "eval.path 'held.jsonl' lack" in said and "label_column" in said


def test_a_held_out_file_without_the_training_columns_is_refused_naming_both(project):
    write(project / "other.jsonl", [{"question": r["prompt"], "answer": r["answer"]} for r in HELD])
    run = run_dir(project, sft_spec("train.jsonl", path="other.jsonl"))
    with pytest.raises(ConfigError) as refused:
        evaluate_run(run, never, k=1, max_tasks=100)
    said = str(refused.value)
    assert said.startswith("eval.path 'other.jsonl': dataset column 'prompt' is missing (the ro")
    assert "give it the same columns" in said


def test_a_held_out_file_training_mostly_saw_is_refused_saying_how_many_are_left(project):
    spec = sft_spec("train.jsonl", path="seen.jsonl")
    write(project / "seen.jsonl", [*TRAIN[:40], *HELD[:3]])  # 3 rows training never saw
    validated = load_spec(spec)
    trained = {r["id"] for r in algorithm_of(validated).prepare(validated.dataset).train}
    seen = sum(r["id"] in trained for r in TRAIN[:40])  # the run holds 5% of its rows out
    assert seen >= 37
    run = run_dir(project, spec)
    with pytest.raises(ConfigError) as refused:
        evaluate_run(run, never, k=1, max_tasks=100)
    said = str(refused.value)
    left = 43 - seen
    assert said.startswith(f"only {left} clean held-out tasks remain in eval.path 'seen.jsonl'")
    assert f"(need at least 5; {seen} dropped as seen in training, 0 repeats)" in said
    assert said.endswith("add rows to the file that training never saw")


def test_a_held_out_file_gone_or_outside_the_allowed_folders_is_refused_by_its_field(
    project, tmp_path_factory, monkeypatch
):
    run = run_dir(project, sft_spec("train.jsonl", path="held.jsonl"))
    (project / "held.jsonl").rename(project / "moved.jsonl")
    with pytest.raises(ConfigError, match=r"eval\.path': 'held\.jsonl' does not exist; give an"):
        evaluate_run(run, never, k=1, max_tasks=100)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)  # the file is in neither the working folder nor the home
    spec = sft_spec(str(project / "train.jsonl"), path=str(project / "moved.jsonl"))
    run = run_dir(elsewhere, spec)
    with pytest.raises(ConfigError, match=r"eval\.path .* is outside the allowed folders"):
        evaluate_run(run, never, k=1, max_tasks=100)


def test_a_metric_named_like_a_component_of_the_training_reward_is_refused(project):
    spec = {**sft_spec("train.jsonl", metrics=[{"name": "rhyme", "label": "name"}])}
    spec["algorithm"] = {"kind": "grpo"}
    spec["reward"] = "tool_call"  # reports its components parsed, name and arguments
    with pytest.raises(ConfigError, match=r"eval\.metrics\[0\] would be reported as 'name'"):
        evaluate_run(run_dir(project, spec), never, k=1, max_tasks=100)


def preference_rows(kind: str, start: int, stop: int) -> list[dict]:
    """Rhyme-gym prompts with a rhyming and a plain verse: DPO's pairs, or KTO's rated answers
    (the rhyming one rated up)."""
    rng = random.Random(start)
    rows = []
    for i, row in enumerate(gym.rows(stop)[start:], start=start):
        topics = gym.pick_topics(rng)
        good, bad = (gym.verse(topics, rng, rhyming=r) for r in (True, False))
        if kind == "dpo":
            rows.append({"id": f"p{i}", "ask": row["prompt"], "good": good, "bad": bad})
        else:
            up = i % 2 == 0
            rows.append({"id": f"f{i}", "ask": row["prompt"], "reply": good if up else bad,
                         "rating": "up" if up else "down"})  # fmt: skip
    return rows


@pytest.mark.parametrize("kind", ["dpo", "kto"])
def test_a_preference_run_is_measured_on_the_users_file_by_a_named_metric_beside_its_headline(
    project, kind
):
    write(project / "prefs.jsonl", preference_rows(kind, 0, 120))
    write(project / "held_prefs.jsonl", preference_rows(kind, 120, 200))  # the user's own
    columns = {"dpo": {"chosen_column": "good", "rejected_column": "bad"},
               "kto": {"response_column": "reply", "label_column": "rating"}}[kind]  # fmt: skip
    spec = {
        "model": "tiny-local",
        "dataset": {"path": "prefs.jsonl", "prompt_column": "ask", "holdout_share": 0.4, **columns},
        "algorithm": {"kind": kind},
        "eval": {"path": "held_prefs.jsonl", "metrics": ["rhyme"]},
    }
    rng = random.Random(1)

    def generate(job):  # the trained model prefers the rhyming answers, and writes them
        n, k = len(job["prompts"]), job["k"]
        verses = {r: [gym.verse(gym.pick_topics(rng), rng, rhyming=r) for _ in range(n)]
                  for r in (True, False)}  # fmt: skip
        out = {
            "base": [[[verses[False][i]] * k for i in range(n)] for _ in job["base_seeds"]],
            "trained": [[verses[True][i]] * k for i in range(n)],
            "nll": None,
        }
        if kind == "dpo":
            out["margins"] = {"base": [-1.0] * n, "trained": [1.0] * n}
        else:
            up = [row["label"] for row in job["feedback"]]
            out["logliks"] = {"base": [-5.0] * n, "trained": [-4.0 if u else -6.0 for u in up]}
        return out

    result = evaluate_run(run_dir(project, spec), generate, k=1, max_tasks=100)
    mine = algorithm_of(kind)
    assert result.held_out.source == "eval.path" and result.held_out.rows == 80
    assert result.metrics[0].name == mine.headline_metric  # the kind's own headline
    names = [m.name for m in result.unoptimised]
    own = [n for n in mine.unoptimised_metrics if n != "reference_nll"]  # no likelihood here
    assert names == [*own, "rhyme", "length_words"]  # the kind's, the user's, then length
    rhyme = result.unoptimised[len(own)]
    assert (rhyme.base_mean, rhyme.trained_mean) == (0.0, 1.0) and not rhyme.optimised


def test_plan_and_launch_say_before_training_that_the_evaluation_would_be_refused(project, home):
    from posttrain.tools.launch import launch
    from posttrain.tools.plan import plan

    write(project / "other.jsonl", [{"question": r["prompt"], "answer": r["answer"]} for r in HELD])
    no_prompt = sft_spec("train.jsonl", path="other.jsonl")
    said = "eval.path 'other.jsonl': dataset column 'prompt' is missing"
    assert any(said in w for w in plan(no_prompt).warnings)
    with pytest.raises(ConfigError) as refused:
        launch(no_prompt)
    assert said in str(refused.value)
    no_label = sft_spec(
        "train.jsonl", metrics=[{"name": "tool_call", "params": {"label_column": "x"}}]
    )
    with pytest.raises(ConfigError) as refused:
        launch(no_label)
    assert "eval.metrics[0] (tool_call) reads column(s) ['x'], which the data's rows" in str(
        refused.value
    )
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())  # nothing started
