"""The verdict measured against a known truth (bench/calibration.py's synthetic clustered
scores, fewer repetitions than the bench): false gains at most the bound, real gains found.

Each rate is a share of 300 repetitions: within about 1.3 points near 2.5%, 2.9 near 50%."""

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from calibration import Cell, run_cell

pytestmark = pytest.mark.slow
REPS = 300


@pytest.mark.parametrize(("n", "k"), [(50, 4), (200, 1)])
def test_when_nothing_changed_improved_is_said_at_most_five_percent_of_the_time(n, k):
    assert run_cell(Cell("null", n, k, 1, (0.0,)), REPS)["improved"] <= 0.05
    assert run_cell(Cell("null, 3 seeds", n, k, 3, (0.0,)), REPS)["improved"] <= 0.05


@pytest.mark.parametrize(("n", "k", "effect"), [(50, 4, 0.10), (200, 4, 0.05)])
def test_a_real_gain_is_found_at_least_half_the_time(n, k, effect):
    assert run_cell(Cell("gain", n, k, 1, (effect,)), REPS)["improved"] >= 0.5


def test_of_four_equal_arms_a_best_is_named_at_most_five_percent_of_the_time():
    cell = Cell("equal", 200, 1, 3, (0, 0, 0, 0), with_base=False)
    assert run_cell(cell, REPS)["best_named"] <= 0.05


def test_an_arm_ahead_by_a_tenth_is_named_and_a_wrong_one_almost_never():
    result = run_cell(Cell("one ahead", 200, 1, 3, (0.1, 0, 0, 0), with_base=False), REPS)
    assert result["true_best_named"] >= 0.5 and result["wrong_best_named"] <= 0.05
