"""The CLI's text views show what its JSON shows: health warnings, the evaluation, trace
`rendered` text (its shared head once), and run ids whole at 80 columns."""

import os
import subprocess
import sys

from tests.conftest import LONG_RUN as RUN  # the long_run fixture's run
from tests.conftest import ROOT


def cli(home, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "POSTTRAIN_HOME": str(home), "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_run_list_at_80_columns_shows_every_run_id_whole(long_run, home):
    assert RUN in cli(home, "run", "list")


def test_run_get_shows_the_health_warnings_its_json_has(long_run, home):
    text = " ".join(cli(home, "run", "get", RUN).split())  # unwrapped
    assert "health: completion length collapsed: 99 -> 21 tokens over the run" in text


def test_run_trace_shows_the_rendered_prompt_and_its_shared_head_once(long_run, home):
    text = cli(home, "run", "trace", RUN, "--step", "last", "--n", "2")
    assert text.count("every sample's rendered starts with") == 1
    assert text.count("# Tools") == 1  # the system prompt and tool schemas, once
    assert text.count("rendered (after the head above):") == 2
    assert "question 400.7" in text
