"""Every CLI command that takes --json prints exactly one JSON document on stdout, as an agent's
shell reads it (piped): `json.loads(stdout)` succeeds. The commands are found in the typer app,
so a new one is covered the day it is added; their arguments come from the argument's name (a
spec, the run a smoke run made, the job an evaluation made), with a few options to keep each
cheap. A command that waits (smoke, the demo) prints its end state only; progress goes to
stderr."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from posttrain.cli.app import app
from tests.conftest import kill_leftover_runs
from tests.specs import tiny

pytestmark = pytest.mark.slow

# Options that keep a command cheap, or keep what it writes inside the test's folder.
CHEAP: dict[str, list[str]] = {
    "smoke": ["--steps", "1"],
    "demo": ["--steps", "1", "--warmstart-steps", "1"],
    "eval": ["--detach"],  # the job it starts is what `job get` and `job cancel` read
    "reward check": ["--spec", "{spec}"],  # no reward named: the spec's
    "run pull": ["--out", "{tmp}/pulled"],
    "run export": ["--out", "{tmp}/exported"],
    "skills install": ["--project-dir", "{tmp}/project"],
}
# Each argument, by its name.
ARGUMENTS = {
    "spec": "{spec}",
    "run_id": "{run_id}",
    "job_id": "{job_id}",
    "target": "calculator",
    "scores": "{scores}",
}
FIRST = ("smoke", "eval")  # they make the run and the job the others read
LAST = ("job cancel", "run cancel")  # they end what the others read


def json_commands() -> Iterator[tuple[str, Any]]:
    """Every command of the app with a --json option, by its words ("run get")."""

    def walk(command: Any, words: list[str]) -> Iterator[tuple[str, Any]]:
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*words, name])
        leaf = not getattr(command, "commands", None)
        if leaf and any("--json" in getattr(p, "opts", ()) for p in command.params):
            yield " ".join(words), command

    yield from walk(typer.main.get_command(app), [])


def arguments(words: str, command: Any, values: dict[str, str]) -> list[str]:
    args = []
    for param in command.params:
        if param.param_type_name == "argument" and param.required:
            assert param.name in ARGUMENTS, (
                f"`posttrain {words}` takes an argument '{param.name}' this test cannot give: "
                f"add a cheap value to ARGUMENTS"
            )
            args.append(ARGUMENTS[param.name])
    args += CHEAP.get(words, [])
    return [a.format(**values) for a in args]


@pytest.mark.timeout(1500)  # a smoke run and the demo, one step each, on a loaded machine
def test_every_command_with_json_prints_one_json_document(tmp_path: Path):
    home = tmp_path / "home"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(tiny(steps=2)))
    env = {**os.environ, "POSTTRAIN_HOME": str(home)}
    commands = dict(json_commands())
    assert {"smoke", "plan", "reward check", "run get", "job get"} <= set(commands)
    rank = {w: i for i, w in enumerate(FIRST)} | {w: 100 + i for i, w in enumerate(LAST)}
    scores = tmp_path / "scores.jsonl"  # two arms, six tasks: compare's smallest file
    scores.write_text(
        "\n".join(
            json.dumps({"arm": arm, "replicate": 0, "task": t, "score": (t + gain) % 2})
            for arm, gain in (("base", 0), ("tuned", 1))
            for t in range(6)
        )
    )
    values = {"spec": str(spec), "tmp": str(tmp_path), "scores": str(scores)}
    documents: dict[str, Any] = {}
    try:
        for words in sorted(commands, key=lambda w: rank.get(w, 50)):
            command = [
                sys.executable, "-m", "posttrain.cli", *words.split(),
                *arguments(words, commands[words], values), "--json",
            ]  # fmt: skip
            done = subprocess.run(
                command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
            )
            try:
                documents[words] = json.loads(done.stdout)
            except json.JSONDecodeError:
                pytest.fail(
                    f"`posttrain {words} --json` (exit {done.returncode}) printed no single "
                    f"JSON document: stdout {done.stdout[:800]!r}; stderr {done.stderr[-800:]!r}"
                )
            if words == "smoke":
                values["run_id"] = documents[words]["run_id"]
            if words == "eval":
                values["job_id"] = documents[words]["job_id"]
    finally:
        kill_leftover_runs(home)
    smoke = documents["smoke"]  # the start and its end, in one document
    assert smoke["status"] == "started" and smoke["ended"][0]["run_id"] == smoke["run_id"]
    assert documents["reward check"]["reward"] == "rhyme"  # the spec's own
