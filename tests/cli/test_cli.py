import json
import subprocess
import sys

from typer.testing import CliRunner

from posttrain.cli.app import app
from tests.conftest import EXAMPLES

runner = CliRunner()


def test_reward_check_prints_json_for_agents():
    result = runner.invoke(
        app,
        ["reward", "check", "rhyme", "--data", str(EXAMPLES), "--honest-column", "verse", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["rows"] == 12 and report["honest"]["mean"] == 1.0
    assert "one_word_lines" not in report["flagged"]


def test_reward_check_takes_parameters_and_flags_a_naive_reward():
    result = runner.invoke(
        app,
        [
            "reward",
            "check",
            "rhyme",
            "--data",
            str(EXAMPLES),
            "--honest-column",
            "verse",
            "--param",
            "min_words_per_line=0",
            "--param",
            "identical_rhymes_count=true",
            "--param",
            "distinct_end_words=false",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert {"one_word_lines", "same_end_word"} <= set(json.loads(result.stdout)["flagged"])


def test_errors_are_json_on_stderr_with_stable_exit_codes(tmp_path):
    missing = runner.invoke(app, ["reward", "check", "rhyme", "--data", str(tmp_path / "x.jsonl")])
    assert missing.exit_code == 3
    assert "does not exist" in json.loads(missing.stderr)["error"]
    bad_param = runner.invoke(
        app, ["reward", "check", "rhyme", "--data", str(EXAMPLES), "--param", "nope=1"]
    )
    assert bad_param.exit_code == 2
    assert "has no parameter ['nope']" in json.loads(bad_param.stderr)["error"]


def test_the_console_script_runs_as_a_real_process():
    out = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "reward", "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert {r["name"] for r in json.loads(out.stdout)} >= {"rhyme", "rhyme_relevance"}


def test_smoke_honours_its_backend_flag(tmp_path, monkeypatch):
    """`smoke --backend modal` must go to Modal (here: refused at once, Modal has no token),
    never run locally for free while the user believes it ran on a GPU."""
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.modal.toml
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
        monkeypatch.delenv(name, raising=False)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"dataset": {"builtin": "rhyme-gym", "n_rows": 64}}))
    result = runner.invoke(app, ["smoke", str(spec), "--backend", "modal", "--json"])
    assert result.exit_code == 5, result.output
    assert "Modal is not configured" in result.output
    assert "confirmation_token" not in result.output
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_help_lists_the_verbs_in_lifecycle_order_says_what_it_trains_and_shows_flags_bare():
    top = runner.invoke(app, ["--help"], terminal_width=200)
    assert top.exit_code == 0
    listed = [line.split()[1] for line in top.stdout.splitlines() if line.startswith("│ ")]
    verbs = [v for v in listed if v in ("plan", "data", "reward", "smoke", "launch", "run", "eval")]
    assert verbs == ["plan", "data", "reward", "smoke", "launch", "run", "eval"], listed
    assert "SmolLM2" in top.stdout and "Post-train Qwen models" not in top.stdout
    demo = runner.invoke(app, ["demo", "--help"], terminal_width=200)
    assert "--json" in demo.stdout and "<bool>" not in demo.stdout  # a flag takes no value
    assert "<int range>" in demo.stdout  # an option that takes one still says what


def test_plan_reads_the_first_rows_and_warns_of_a_column_the_data_lacks(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_HOME", str(tmp_path / "home"))
    data = tmp_path / "qa.jsonl"
    data.write_text('{"question": "Why is the sky blue?", "answer": "Rayleigh"}\n' * 8)
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "dataset": {"path": str(data), "prompt_column": "question"},
                "reward": "relevance",  # reads a reference column, which this data names answer
            }
        )
    )
    result = runner.invoke(app, ["plan", str(spec), "--json"])
    assert result.exit_code == 0, result.output  # a plan warns; launch is what refuses
    warned = [w for w in json.loads(result.stdout)["warnings"] if "is missing" in w]
    assert len(warned) == 1, json.loads(result.stdout)["warnings"]
    assert "dataset column 'reference' is missing" in warned[0]
    assert "the rows have: ['answer', 'question']" in warned[0]
    assert "reference_column" in warned[0]  # the fix: name the column the data has
    text = runner.invoke(app, ["plan", str(spec)], terminal_width=80)
    assert "dataset column 'reference' is missing" in " ".join(text.stdout.split())


def test_usage_errors_with_a_known_fix_print_it():
    flag = runner.invoke(app, ["reward", "list", "--json", "true"])
    assert flag.exit_code == 2 and "write --json, not --json true" in flag.output
    no_run = runner.invoke(app, ["run", "get"])
    assert no_run.exit_code == 2 and "`posttrain run list` shows the run ids" in no_run.output
    no_spec = runner.invoke(app, ["plan"])
    assert no_spec.exit_code == 2 and "RunSpec file" in no_spec.output
