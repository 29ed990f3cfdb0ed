"""bench/gpu_first_contact.py in its dry mode: every check it will run on a lent GPU runs here
on the CPU (the tiny model, gloo for the agreement), so the script a GPU session depends on
cannot rot between sessions. Its figures here mean nothing; its JSON and its verdicts do."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


# The checks whose paths no other test takes (the agreement's ranks, accelerate from the run
# folder, the weights a full fine-tune changed, plan's fit beside a measured peak); resume, DPO
# and distillation through the trainer are tested elsewhere, and the whole dry mode (92 s on 2
# cores) is run by hand: `PYTHONPATH=. python bench/gpu_first_contact.py --dry`.
CHECKS = ("nccl_agreement", "accelerate_launch", "full_finetune", "grpo_4b_memory")


def test_the_first_contact_bench_runs_its_checks_in_its_dry_mode_and_says_so_in_one_json():
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "gpu_first_contact.py"),
            "--dry",
            "--only",
            ",".join(CHECKS),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    report = json.loads(done.stdout)  # one document on stdout; progress went to stderr
    assert done.returncode == 0 and report["ok"], report
    assert set(report["checks"]) == set(CHECKS)
    memory = report["checks"]["grpo_4b_memory"]
    assert memory["batch_256"]["measured_peak_gb"] > memory["batch_32"]["measured_peak_gb"]
    assert report["checks"]["full_finetune"]["share_changed"] > 0.9
    [rank] = report["checks"]["nccl_agreement"]["ranks"]
    assert rank["agreed_when_one_says_stop"] and not rank["agreed_when_none_does"]
