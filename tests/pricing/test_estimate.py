"""The price a human approves: the step model against the measurements it was fitted to, its
scaling to other GPUs and shapes, what finished runs teach it, the timeout, the projection
while a run trains, and no question asked for a launch that cannot start."""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from mcp import Client

from posttrain.core.errors import BackendError
from posttrain.models.calibration import MEASUREMENTS, fitted
from posttrain.pricing.projection import over_estimate, project
from posttrain.runs.context import Context
from posttrain.server.app import build_server
from posttrain.tools.launch import human_question, launch
from posttrain.tools.plan import plan
from tests.conftest import ROOT, wait_finished
from tests.run_rows import run_row
from tests.specs import tiny

GRPO_06B = {
    "model": "Qwen3-0.6B",
    "algorithm": {
        "kind": "grpo",
        "steps": 100,
        "batch_size": 64,
        "num_generations": 8,
        "max_completion_length": 256,
        "lora": {"r": 16},
    },
    "compute": {"backend": "modal", "gpu": "H200", "timeout_s": 7200},
}
SFT_17B = {
    "model": "Qwen3-1.7B",
    "algorithm": {
        "kind": "sft",
        "steps": 1000,
        "batch_size": 8,
        "max_prompt_length": 48,
        "max_completion_length": 2000,
        "lora": {"r": 16},
    },
    "compute": {"backend": "modal", "gpu": "H200", "timeout_s": 7200},
}


def with_gpu(spec: dict, gpu: str, **algorithm) -> dict:
    return {
        **spec,
        "algorithm": {**spec["algorithm"], **algorithm},
        "compute": {**spec["compute"], "gpu": gpu},
    }


def test_the_anchors_are_reproduced_within_two_x(home):
    grpo = plan(GRPO_06B).cost
    measured_grpo = 100 * 24 + 180  # 23-26 s a step on an H200, plus start-up
    assert measured_grpo / 2 <= grpo.expected_s <= measured_grpo * 2
    assert 23 <= grpo.step_s <= 26
    sft = plan(SFT_17B).cost
    assert 830 / 2 <= sft.expected_s <= 830 * 2
    assert "calibrated on H200 measurements" in grpo.basis and grpo.runs_used == []


def test_the_fit_comes_from_the_table_and_each_entry_says_how_it_was_measured():
    fit = fitted()
    assert 0.15 < fit.training_mfu < 0.30  # the SFT measurement at 6N
    assert fit.trl_generation_factor > 1  # TRL's generation is slower than raw generate
    assert 0.001 < fit.decode_overhead_s_per_layer < 0.002  # 41 ms a step over 28 layers
    for m in MEASUREMENTS:
        assert m.date and m.machine and m.software and m.command


def test_other_gpus_scale_sensibly(home):
    h200 = plan(GRPO_06B).cost
    h100 = plan(with_gpu(GRPO_06B, "H100")).cost
    a10 = plan(with_gpu(GRPO_06B, "A10")).cost
    assert h100.step_s >= h200.step_s  # less bandwidth, same FLOP/s
    assert a10.step_s > h100.step_s
    assert "scaled to H100 by bandwidth and FLOP/s" in h100.basis
    # a quarter of the batch a GPU generates as long as the whole (memory-bound), then waits
    assert plan(with_gpu(GRPO_06B, "H100:4")).cost.step_s > h100.step_s
    bigger = plan({**with_gpu(GRPO_06B, "H100"), "model": "Qwen3-4B"}).cost
    assert bigger.step_s > h100.step_s and bigger.expected_high_s > bigger.expected_s
    assert "6.7x its parameters" in bigger.basis


def test_a_model_that_does_not_fit_is_warned_and_one_that_does_is_not(home):
    full_8b = {**with_gpu(GRPO_06B, "T4"), "model": "Qwen3-8B"}
    full_8b["algorithm"] = {**full_8b["algorithm"], "lora": None}
    result = plan(full_8b)
    assert result.fit["fits"] is False
    assert any("needs about" in w and "T4 has 16 GB" in w for w in result.warnings)
    lora_4b = plan({**with_gpu(GRPO_06B, "H100"), "model": "Qwen3-4B"})
    assert lora_4b.fit["fits"] is True


def test_a_price_file_with_a_new_gpu_type_does_not_crash(home, tmp_path, monkeypatch):
    (tmp_path / "prices.json").write_text(json.dumps({"B200": 0.0019}))
    monkeypatch.setenv("POSTTRAIN_GPU_PRICES", str(tmp_path / "prices.json"))
    result = plan(with_gpu(GRPO_06B, "B200"))
    assert result.cost.usd_per_s == 0.0019 and result.cost.step_s > 0
    assert "none known for B200" in result.cost.basis
    assert any("memory of a B200 is not in posttrain's table" in w for w in result.warnings)


def test_a_run_likely_to_hit_its_timeout_is_warned_and_the_human_told(home, modal_fake):
    long = {**GRPO_06B, "compute": {"backend": "modal", "gpu": "H200", "timeout_s": 600}}
    result = plan(long)
    note = result.cost.timeout_note
    assert note and "likely to be stopped at about step 17 of 100 by its timeout" in note
    assert (
        result.warnings[0].startswith("Its timeout stops it")
        and "step 17 of 100" in (result.warnings[0])
    )
    asked = human_question(long, ctx=Context())
    assert asked is not None and asked.startswith(result.cost.summary)


def test_the_projection_of_a_run_from_its_own_step_times():
    row = run_row(status="running", phase="train", step=10, total_steps=100)
    metrics = [{"phase": "train", "step": i, "step_time_s": 60.0} for i in range(1, 11)]
    metrics[0]["step_time_s"] = 200.0  # the first step carries the set-up: not projected
    meta = {"created_at": 1000.0, "usd_per_s": 0.001, "gpu_count": 2, "expected_usd": 5.0}
    p = project(row, metrics, meta, timeout_s=3600, cost_so_far_usd=1.6, now=1800.0)
    assert p.s_per_step == 60.0 and p.steps_left == 90
    assert p.projected_end_at == 1800.0 + 90 * 60.0
    assert p.projected_total_s == 1800.0 + 5400.0 - 1000.0
    assert p.projected_total_usd == round(6200.0 * 0.002, 2)
    # the timeout falls at 1000 + 3600 = 4600 s: (4600 - 1800) / 60 = 46 more steps, step 56
    assert p.ends_before_timeout is False and "at about step 56 of 100" in p.note
    warning = over_estimate(p)
    assert warning and "over 2x the $5.00 the launch was approved with" in warning
    ok = project(row, metrics, {**meta, "expected_usd": 20.0}, 3600, 1.6, 1800.0)
    assert over_estimate(ok) is None
    assert project(replace(row, status="succeeded"), metrics, meta, 3600, 1.6) is None


@pytest.mark.slow
def test_a_finished_local_run_calibrates_the_next_plan_of_its_shape(home):
    spec = tiny(steps=6)
    before = plan(spec).cost
    assert before.runs_used == [] and "bench/smoke.py" in before.basis
    run_id = launch(spec).run_id
    detail = wait_finished(run_id, 300)
    assert detail.status == "succeeded", detail.cause
    assert detail.projection is None  # finished: nothing left to project
    after = plan(spec).cost
    assert after.runs_used == [run_id]
    assert "measured: the median steady step of 1 finished run(s) of this exact shape" in (
        after.basis
    )
    # the steady step: the median past the first two (warm-up) steps
    steady = [m["step_time_s"] for m in get_metrics(run_id)][2:]
    assert after.step_s == pytest.approx(statistics.median(steady), rel=0.01)
    other = {**spec, "algorithm": {**spec["algorithm"], "batch_size": 16}}
    assert plan(other).cost.runs_used == []  # another shape learns nothing from it


def get_metrics(run_id):
    from posttrain.tools.runs import get_run

    return get_run(run_id, verbose=True).metrics


# -- a paid launch that cannot start is refused before anyone is asked ---------------------

MODAL_SPEC = {
    "dataset": {"builtin": "rhyme-gym", "n_rows": 64},
    "compute": {"backend": "modal", "gpu": "A10", "timeout_s": 600},
}


@pytest.mark.parametrize("mode", ("legacy", "2026-07-28"))
def test_without_a_modal_token_mcp_launch_fails_at_once_with_no_token_or_question(
    home, mode, no_modal_token
):
    ctx = Context()
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        raise AssertionError("nobody should be asked about a launch that cannot start")

    async def main():
        async with Client(build_server(ctx), mode=mode, elicitation_callback=elicit) as client:
            return await client.call_tool("launch", {"spec": MODAL_SPEC})

    result = asyncio.run(main())
    assert result.is_error
    assert "Modal is not configured: run `modal token new`" in result.content[0].text
    assert asked == []
    assert _tokens_issued(home) == 0


def test_without_a_modal_token_the_tool_raises_before_issuing_a_token(home, no_modal_token):
    ctx = Context()
    assert human_question(MODAL_SPEC, ctx=ctx) is None
    t = time.perf_counter()
    with pytest.raises(BackendError, match="Modal is not configured"):
        launch(MODAL_SPEC, ctx=ctx)
    assert time.perf_counter() - t < 5 and _tokens_issued(home) == 0


@pytest.mark.slow
def test_without_a_modal_token_the_cli_says_so_and_gives_no_token(home, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(MODAL_SPEC))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env.update(POSTTRAIN_HOME=str(home), HOME=str(tmp_path))  # no ~/.modal.toml either
    out = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "launch", str(spec), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 5, out.stderr
    assert "Modal is not configured" in out.stderr
    assert "confirmation_token" not in out.stdout + out.stderr
    assert _tokens_issued(home) == 0
    assert ROOT.is_dir()


def _tokens_issued(home) -> int:
    import sqlite3

    ledger = home / "budget.sqlite"
    if not ledger.exists():
        return 0
    with sqlite3.connect(ledger) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return db.execute("SELECT COUNT(*) FROM tokens").fetchone()[0] if "tokens" in tables else 0
