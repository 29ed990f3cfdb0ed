"""One price, told straight: the whole run priced beside what its timeout lets it spend, the
timeout's stop said first in `plan` and in the approval question, caps checked in `plan` in
`launch`'s words, and a spec that cannot launch where it is aimed never priced as a run."""

import json
import subprocess
import sys

import pytest

from posttrain.core.errors import BudgetError, ConfigError
from posttrain.runs.context import Context
from posttrain.tools.launch import human_question, launch
from posttrain.tools.plan import plan
from tests.conftest import EXAMPLES, ROOT

# The spec: Qwen3-4B GRPO, 300 steps, one H100, a one-hour timeout.
QWEN3_4B = {
    "model": "Qwen3-4B",
    "dataset": {"path": str(EXAMPLES), "reference_column": "reference"},
    "reward": {"name": "rhyme_relevance", "params": {"reference_column": "reference"}},
    "algorithm": {
        "kind": "grpo",
        "steps": 300,
        "batch_size": 32,
        "num_generations": 8,
        "max_completion_length": 256,
    },
    "compute": {"backend": "modal", "gpu": "H100", "timeout_s": 3600},
}


def with_compute(**compute) -> dict:
    return {**QWEN3_4B, "compute": {**QWEN3_4B["compute"], **compute}}


@pytest.fixture
def modal_ctx(home, modal_fake):
    """A context whose Modal backend is the real SDK, talking to the fake Modal."""
    return Context()


def test_a_run_its_timeout_stops_is_priced_whole_and_the_stop_is_said_first(home, modal_ctx):
    result = plan(QWEN3_4B)
    cost = result.cost
    assert cost.stop_step == 98
    # what the timeout lets it spend; the most it can cost adds two container starts (180 s)
    assert (cost.expected_usd, cost.worst_case_usd) == (4.51, 4.73)
    assert cost.container_usd_per_s == pytest.approx(0.001097 + 4 * 0.0000131 + 46 * 0.00000222)
    assert cost.worst_case_usd == round((3600 + 180) * cost.container_usd_per_s, 2)
    assert (cost.run_usd, cost.run_high_usd) == (13.27, 32.95)  # what finishing needs
    assert round(cost.run_s / 60, 1) == 176.7
    assert cost.summary.startswith(
        "Its timeout stops it: compute.timeout_s 3600 (60.0 min) ends the run at about step 98 "
        "of 300, having spent about $4.51 on 1x H100. Finishing needs about 176.7 min and $13.27"
    )
    assert result.warnings[0] == cost.summary
    asked = human_question(QWEN3_4B, ctx=modal_ctx)
    assert asked.startswith(cost.summary)
    assert "anyway, to be stopped at step 98, for at most $4.73?" in asked


def test_a_run_that_finishes_in_its_timeout_is_priced_whole_with_its_range(home, modal_ctx):
    spec = with_compute(timeout_s=19_000)
    cost = plan(spec).cost
    assert cost.stop_step is None and cost.run_usd == cost.expected_usd == 13.27
    assert cost.summary.startswith(
        "estimated 176.7 min and $13.27 on 1x H100 (34.74 s a step), up to "
    )
    assert (
        f"at most ${cost.worst_case_usd:.2f} (its whole 316.7 min timeout and two container "
        f"starts (180 s: Modal's restarts resume inside the timeout), 4 CPU cores and 46 GiB of "
        f"memory included)" in cost.summary
    )
    asked = human_question(spec, ctx=modal_ctx)
    assert asked.startswith(
        f"Launch Qwen3-4B (grpo, 300 steps) on H100 for up to 317 min: {cost.summary}"
    )


def test_a_timeout_past_the_per_run_cap_is_warned_in_plan_with_launchs_own_words(home, modal_ctx):
    spec = with_compute(timeout_s=26_400)  # $33.27 worst case, over the default $25 cap
    with pytest.raises(BudgetError) as refused:
        launch(spec, ctx=modal_ctx)
    assert f"launch would answer: {refused.value}" in plan(spec).warnings
    within = with_compute(timeout_s=19_000)  # $24.00
    assert not any("launch would answer" in w for w in plan(within).warnings)


def test_a_timeout_too_short_says_when_the_timeout_that_finishes_would_pass_the_cap(home):
    warnings = plan(QWEN3_4B).warnings
    assert any(
        w.startswith("with compute.timeout_s 26340, launch would say: refused: the worst case")
        and "per-run cap $25.00" in w
        for w in warnings
    )


def test_a_real_model_on_the_local_backend_is_not_priced_as_a_local_run(home):
    spec = with_compute(backend="local", gpu=None)
    with pytest.raises(ConfigError) as refused:
        launch(spec)
    cost = plan(spec).cost
    assert cost.refused == str(refused.value)
    assert (cost.expected_s, cost.run_s, cost.step_s) == (0.0, 0.0, 0.0)
    assert cost.alternative is not None and cost.alternative.backend == "modal"
    assert cost.alternative.run_usd > 0
    assert cost.summary.startswith(f"Cannot launch as written: {refused.value}. On modal: ")
    assert f"launch would answer: {refused.value}" in plan(spec).warnings


def test_the_uncertainty_says_which_way_the_shape_differs_from_its_measurement(home):
    basis = plan(QWEN3_4B).cost.basis  # 32 x 384 tokens against the anchor's 64 x 256+
    assert "1/1.5 of its tokens a step" in basis and "6.7x its parameters" in basis


def test_the_cli_plan_leads_with_the_timeout_stop_and_its_json_has_the_whole_run(home, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(QWEN3_4B))
    env = {"POSTTRAIN_HOME": str(home), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "posttrain.cli", "plan", str(path), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
            check=True,
        )
        return done.stdout

    text = cli().splitlines()
    assert text[1].startswith("Its timeout stops it: compute.timeout_s 3600")
    assert not any(line.startswith("warning: Its timeout") for line in text)  # said once
    cost = json.loads(cli("--json"))["cost"]
    assert (cost["stop_step"], cost["run_usd"], cost["worst_case_usd"]) == (98, 13.27, 4.73)


def test_the_readmes_example_spec_launches_as_written(home, modal_ctx, monkeypatch):
    import yaml

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("A spec (YAML or JSON) looks like this", 1)[1]
    spec = yaml.safe_load(block.split("```yaml\n", 1)[1].split("```", 1)[0])
    monkeypatch.chdir(ROOT)  # its data path is the repository's example file
    result = plan(spec)
    assert result.cost.refused is None and result.cost.stop_step is None
    assert not any("launch would answer" in w for w in result.warnings), result.warnings
    assert result.spec["model"]["chat_template_kwargs"] == {"enable_thinking": False}
    asked = human_question(spec, ctx=modal_ctx)  # resolved: data and reward columns checked
    assert asked and asked.startswith("Launch Qwen3-4B (grpo, 300 steps) on H100")
