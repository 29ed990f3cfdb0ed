"""bench/gpu_first_contact.py in its dry mode: every check it will run on a lent GPU runs here
on the CPU (the tiny model, gloo for the agreement), so the script a GPU session depends on
cannot rot between sessions. Its figures here mean nothing; its JSON and its verdicts do."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_first_contact_bench_runs_every_check_in_its_dry_mode_and_says_so_in_one_json():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_first_contact.py"), "--dry"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    report = json.loads(done.stdout)  # one document on stdout; progress went to stderr
    assert done.returncode == 0 and report["ok"], report
    assert set(report["checks"]) == {
        "nccl_agreement",
        "accelerate_launch",
        "resume_after_kill",
        "dpo_step",
        "distill_step",
        "full_finetune",
        "grpo_4b_memory",
    }
    assert report["checks"]["resume_after_kill"]["resumed_steps"][0] > 1
    assert report["checks"]["full_finetune"]["share_changed"] > 0.9
    [rank] = report["checks"]["nccl_agreement"]["ranks"]
    assert rank["agreed_when_one_says_stop"] and not rank["agreed_when_none_does"]
