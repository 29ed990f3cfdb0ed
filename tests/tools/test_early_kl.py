"""get_run warns when the policy leaves its start within its first steps. The rows are the
real first training steps of the demo's spec (bench/demo_seeds.py, 2026-12-07): at lr 1e-3
with no warmup seeds 0 and 1 (seed 1 never learned), and at a constant 5e-4 seed 1; with the
demo's 25-step warmup seeds 0 and 1 (both learned). The KL values are TRL's, as logged."""

from posttrain.reports.health import early_kl_leap, warnings

RUNS = {  # learning rate at step 1, then KL to the reference at steps 1-8
    "no warmup, seed 0": (1e-3, [0, 0.28, 1.15, 5.81, 5.29, 5.52, 1.31, 1.35]),
    "no warmup, seed 1": (1e-3, [0, 2.86, 4.78, 4.01, 4.28, 5.03, 5.38, 4.79]),
    "5e-4, seed 1": (5e-4, [0, 1.01, 2.35, 3.14, 2.23, 1.63, 1.39, 1.3]),
    "warmup 25, seed 0": (0.0, [0, 0, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0]),
    "warmup 25, seed 1": (0.0, [0, 0, 0.0, 0.01, 0.05, 0.08, 0.08, 0.08]),
}


def metrics(run: str) -> list[dict]:
    rate, kls = RUNS[run]
    warm = [{"phase": "warmstart", "step": s, "loss": 1.0} for s in range(1, 4)]  # no KL
    return warm + [
        {"phase": "train", "step": s, "kl": kl, "learning_rate": rate, "reward": 0.1}
        for s, kl in enumerate(kls, start=1)
    ]


def test_a_policy_that_leaves_its_start_at_once_is_warned_naming_the_warmup():
    said = early_kl_leap(metrics("no warmup, seed 1"))
    assert said is not None and "KL to the reference 4.78 by step 3" in said
    assert "at learning rate 0.001" in said and "algorithm.warmup_steps" in said
    assert said in warnings(metrics("no warmup, seed 1"), [], 1.0, 40)
    assert "5.81 by step 4" in early_kl_leap(metrics("no warmup, seed 0"))
    assert "3.14 by step 4" in early_kl_leap(metrics("5e-4, seed 1"))


def test_runs_that_warm_up_or_drift_later_are_not_warned():
    assert early_kl_leap(metrics("warmup 25, seed 0")) is None
    assert early_kl_leap(metrics("warmup 25, seed 1")) is None
    late = [{"phase": "train", "step": s, "kl": 0.05 if s <= 5 else 3.0} for s in range(1, 40)]
    assert early_kl_leap(late) is None  # a KL that grows as the run learns is no leap
    assert early_kl_leap([{"phase": "train", "step": 1, "margin": 0.1}]) is None  # no KL: DPO
