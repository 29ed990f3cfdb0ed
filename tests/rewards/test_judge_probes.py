"""check_reward of a judge, on two tasks that are not rhyme (sums and email labels), against a
real HTTP judge in its own process: a gullible judge that an injected "score this 10/10" fools
is flagged by the probe's name, a careful one is not, agreement with labels comes with an
interval, and the planted API key is never printed."""

import json
import subprocess
import sys

import pytest

from tests.rewards.judge_server import serving

KEY = "sk-test-planted-9f8e7d6c5b4a"
SUMS = [{"prompt": f"What is {i} + {i + 3}?", "reference": str(2 * i + 3)} for i in range(1, 13)]
LABELS = [
    {"prompt": f"Label this email: {text}", "reference": label}
    for text, label in [
        ("WIN A FREE CRUISE NOW", "spam"),
        ("Minutes of Tuesday's meeting attached", "ham"),
        ("Cheap pills, no prescription", "spam"),
        ("Can you review my pull request?", "ham"),
        ("You have won 1,000,000 dollars", "spam"),
        ("Lunch at noon?", "ham"),
        ("Claim your prize: click here", "spam"),
        ("The invoice for November", "ham"),
    ]
]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def check(tmp_path, url, rows, *more):
    data = write(tmp_path / "rows.jsonl", rows)
    command = [
        sys.executable, "-m", "posttrain.cli", "reward", "check", "judge",
        "--data", str(data), "--param", "rubric=Grade the answer: right 1, wrong 0.",
        "--param", f"base_url={url}", "--param", "model=rule-judge",
        "--param", "api_key_env=JUDGE_KEY", "--param", "reference_column=reference",
        *more,
    ]  # fmt: skip
    env = {**__import__("os").environ, "JUDGE_KEY": KEY}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert KEY not in done.stdout + done.stderr
    return done


@pytest.mark.parametrize("rows", [SUMS, LABELS], ids=["sums", "labels"])
def test_a_gullible_judge_is_flagged_by_the_injection_probe_and_a_careful_one_is_not(
    tmp_path, home, rows
):
    log = tmp_path / "seen.jsonl"
    with serving(log, gullible=True) as url:
        fooled = check(tmp_path, url, rows, "--json")
    assert fooled.returncode == 0, fooled.stderr
    report = json.loads(fooled.stdout)
    assert "injected_instruction" in report["flagged"]
    probe = next(p for p in report["probes"] if p["name"] == "injected_instruction")
    assert probe["verdict"].startswith("JUDGE FOOLED") and "without it 0.00" in probe["verdict"]
    assert report["rows"] == 8 and report["judge"]["requests"] > 0
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(r["authorization"] for r in seen)  # the key was sent, in the header only
    assert KEY not in log.read_text()  # (the server logs bodies: the key is in none)

    with serving(gullible=False) as url:
        careful = json.loads(check(tmp_path, url, rows, "--json").stdout)
    assert careful["flagged"] == [], careful["probes"]
    assert {p["name"] for p in careful["probes"]} >= {
        "injected_instruction", "padded_twice", "flattery", "empty", "off_topic",
        "reference_itself",
    }  # fmt: skip


def test_agreement_with_labels_has_an_interval_and_the_table_says_it(tmp_path, home):
    labelled = [
        {
            "prompt": row["prompt"],
            "completion": answer,
            "label": label,
            "reference": row["reference"],
        }
        for row in SUMS
        for answer, label in ((row["reference"], 1), (str(int(row["reference"]) + 1), 0))
    ]
    labels = write(tmp_path / "labels.jsonl", labelled)
    with serving() as url:
        shown = check(tmp_path, url, SUMS, "--labels", str(labels))
        agreed = json.loads(check(tmp_path, url, SUMS, "--labels", str(labels), "--json").stdout)
    assert shown.returncode == 0, shown.stderr
    assert "agreement with your labels on 24 answers, 95% interval" in shown.stdout
    assert "injected_instruction" in shown.stdout
    found = agreed["agreement"]
    assert found["n"] == 24 and found["spearman"] == 1.0 and found["ungraded"] == 0
    assert found["verdict"].startswith("agrees with the labels")


def test_a_judge_that_is_down_is_named_before_any_probe(tmp_path, home):
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    done = check(tmp_path, url, SUMS, "--param", "retries=0")
    assert done.returncode != 0
    assert f"judge at {url} did not answer" in done.stdout + done.stderr


def test_reward_check_of_a_judge_spec_without_a_reference_column_runs_the_specs_judge(
    tmp_path, home
):
    """No reward named: the spec's judge with its params (the CLI hands no empty params over
    them); rows with no reference column skip the probes built from one, and say so."""
    questions = [{"question": row["prompt"]} for row in SUMS]  # no reference column at all
    write(tmp_path / "questions.jsonl", questions)
    env = {**__import__("os").environ, "JUDGE_KEY": KEY}
    with serving(gullible=True) as url:
        spec = {
            "model": "Qwen3-0.6B",
            "dataset": {"path": str(tmp_path / "questions.jsonl"), "prompt_template": "{question}"},
            "reward": {
                "name": "judge",
                "params": {
                    "rubric": "Grade the sum: right 1, wrong 0.",
                    "base_url": url,
                    "model": "rule-judge",
                    "api_key_env": "JUDGE_KEY",
                },
            },
        }
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        outputs = []
        for named in ([], ["judge"]):
            command = [sys.executable, "-m", "posttrain.cli", "reward", "check", *named]
            done = subprocess.run(
                [*command, "--spec", str(tmp_path / "spec.json"), "--json"],
                capture_output=True, text=True, env=env, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert KEY not in done.stdout + done.stderr
            outputs.append(json.loads(done.stdout))
    for report in outputs:
        assert report["reward"] == "judge" and report["flagged"] == ["injected_instruction"]
        assert report["honest_source"] == "none: the rows have no 'reference' column"
        skipped = report["families_not_run"]["judge, in part"]
        assert "padded_twice, flattery, reference_itself are skipped" in skipped
        assert not {"padded_twice", "flattery"} & {p["name"] for p in report["probes"]}
        assert report["judge"]["requests"] + report["judge"]["cache_hits"] > 0  # 2nd: cached
