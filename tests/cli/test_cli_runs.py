"""The run commands as a person or a shell-driven agent uses them: real processes, JSON out."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from posttrain.runs.layout import FINAL_STATUSES
from tests.conftest import wait_for

pytestmark = pytest.mark.slow


def cli(*args, home, check=True):
    env = {**os.environ, "POSTTRAIN_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"exit {out.returncode}: {out.stderr}")
    return out


def test_a_run_started_by_the_cli_outlives_it_and_reads_back_as_json(tmp_path):
    home = tmp_path / "home"
    spec = tmp_path / "smoke.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "dataset": {
                    "builtin": "rhyme-gym",
                    "n_rows": 100,
                    "system_prompt": "answer in rhyme",
                },
                "reward": "rhyme",
                "algorithm": {
                    "steps": 3,
                    "lora": None,
                    "learning_rate": 5e-4,
                    "max_completion_length": 24,
                    "save_every": 0,
                    "traces": {"every": 0, "samples": 2},
                },
            }
        )
    )
    started = json.loads(cli("run", "start", str(spec), "--json", home=home).stdout)
    run_id = started["run_id"]  # the CLI process has exited; the run goes on without it

    def done():
        got = json.loads(cli("run", "get", run_id, "--json", home=home).stdout)
        return got if got["status"] in FINAL_STATUSES else None

    got = wait_for(done, timeout_s=180, every_s=1)
    assert got["status"] == "succeeded" and got["step"] == 3
    listed = json.loads(cli("run", "list", "--since", "1h", "--json", home=home).stdout)
    assert [r["run_id"] for r in listed] == [run_id]
    logs = json.loads(cli("run", "logs", run_id, "--tail", "3", "--json", home=home).stdout)
    assert logs["lines"][-1]["message"] == "run succeeded"
    found = json.loads(
        cli("run", "logs", run_id, "--search", "training rows", "--json", home=home).stdout
    )
    assert len(found["lines"]) == 1
    trace = json.loads(
        cli(
            "run",
            "trace",
            run_id,
            "--step",
            "1-3",
            "--out",
            str(tmp_path / "traces"),
            "--json",
            home=home,
        ).stdout
    )
    assert sorted(trace["steps"]) == ["1", "3"]
    assert (tmp_path / "traces" / "step_0003.jsonl").read_text().count("\n") == 2
    plot = cli("run", "get", run_id, "--plot", home=home).stdout
    assert "reward per step" in plot


def test_errors_have_stable_exit_codes_and_json_on_stderr(tmp_path):
    home = tmp_path / "home"
    missing = cli("run", "get", "run-000000-000000-0000", home=home, check=False)
    assert missing.returncode == 3 and "no run" in json.loads(missing.stderr)["error"]
    invalid = cli("run", "get", "../../etc/passwd", home=home, check=False)
    assert invalid.returncode == 2 and "not valid" in json.loads(invalid.stderr)["error"]
    (tmp_path / "bad.yaml").write_text("algorithm: {lr: 0.1}\n")
    bad = cli("run", "start", str(tmp_path / "bad.yaml"), home=home, check=False)
    assert bad.returncode == 2 and "did you mean 'learning_rate'" in bad.stderr


def test_a_dry_run_that_fails_says_so_in_its_exit_code_in_a_pipe_in_events_and_its_view(tmp_path):
    home = tmp_path / "home"
    (tmp_path / "nan_reward.py").write_text(
        "def score(completions, **kw):\n    return [float('nan') for _ in completions]\n"
    )
    spec = tmp_path / "nan.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "model": "Qwen3-0.6B",  # a dry run: the stand-in of a real preset
                "dataset": {"builtin": "rhyme-gym", "n_rows": 64, "system_prompt": "rhyme"},
                "reward": f"{tmp_path / 'nan_reward.py'}:score",
                "algorithm": {"steps": 3, "batch_size": 8, "num_generations": 4},
            }
        )
    )
    out = cli("smoke", str(spec), home=home, check=False)  # captured: no terminal
    assert out.returncode == 1, out.stdout + out.stderr
    assert "failed (failed)" in out.stdout and "returned nan" in out.stdout
    assert "cut algorithm.steps" not in out.stdout  # 3 steps are kept: a cut only lowers
    run_id = out.stdout.split("existing " if "existing " in out.stdout else "started ")[1].split()[
        0
    ]
    view = cli("run", "get", run_id, home=home).stdout
    assert "dry run (failed: it did not complete)" in view
    streamed = cli("smoke", str(spec), "--events", home=home, check=False)  # JSON lines
    assert streamed.returncode == 1
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert events[0]["status"] in ("started", "existing") and events[0]["run_id"]  # the launch
    assert all(e["event"] == "progress" for e in events[1:-1])
    ended = events[-1]["ended"]  # the result object, last
    assert ended[0]["status"] == "failed" and "returned nan" in ended[0]["cause"]
