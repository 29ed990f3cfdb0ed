"""What DPO's health and a preference file's flags say, on tasks that are not the rhyme: the
known DPO failure (chosen answers losing likelihood while the margin grows) is warned and a
healthy run is not; a length bias is named in the direction it runs, for arithmetic answers
and for support replies."""

from posttrain.data.preference import pair_flags
from posttrain.reports.health import chosen_likelihood_falls, warnings


def dpo_metrics(chosen_start: float, chosen_step: float, steps: int = 30) -> list[dict]:
    return [
        {
            "phase": "train",
            "step": s,
            "margin": 0.05 * s,
            "preference_accuracy": min(1.0, 0.5 + 0.02 * s),
            "logp_chosen": chosen_start + chosen_step * s,
            "logp_rejected": chosen_start - 0.5 * s,
        }
        for s in range(1, steps + 1)
    ]


def test_chosen_answers_losing_likelihood_while_the_margin_grows_are_warned():
    falling = dpo_metrics(-40.0, -0.3)
    warning = chosen_likelihood_falls(falling)
    assert warning is not None
    assert "-41.6 -> -47.6" in warning and "margin 0.28 -> 1.27" in warning
    assert "algorithm.dpo.beta" in warning
    assert warning in warnings(falling, [], None, None)


def test_a_run_whose_chosen_answers_get_likelier_or_that_is_short_is_not_warned():
    assert chosen_likelihood_falls(dpo_metrics(-40.0, 0.1)) is None
    assert chosen_likelihood_falls(dpo_metrics(-40.0, -0.3, steps=12)) is None  # too few steps
    assert chosen_likelihood_falls([{"step": 1, "reward": 0.5}] * 40) is None  # not DPO


def pair(i: int, prompt: str, chosen: str, rejected: str) -> dict:
    return {
        "id": f"r{i}",
        "prompt_text": prompt,
        "prompt": [{"role": "user", "content": prompt}],
        "chosen": [{"role": "assistant", "content": chosen}],
        "rejected": [{"role": "assistant", "content": rejected}],
    }


def test_arithmetic_pairs_whose_chosen_answers_are_shorter_are_called_a_length_bias():
    rows = [
        pair(i, f"What is {i} + {i + 3}?", f"{2 * i + 3}", f"Let me think step by step... {i}")
        for i in range(12)
    ]
    (flag,) = pair_flags(rows)
    assert flag.startswith("length bias: the chosen answer is the shorter one in 100%")
    assert "characters" in flag  # no token counts given: characters compared, and said


def test_support_replies_whose_chosen_answers_are_longer_are_called_a_length_bias():
    rows = [
        pair(
            i,
            f"My order #{i} has not arrived.",
            f"I'm sorry order #{i} is late. I have checked it: it ships tomorrow, and here is "
            f"a 10% voucher.",
            f"Order #{i}: wait.",
        )
        for i in range(10)
    ]
    lengths = [(30 + i, 6) for i in range(10)]
    (flag,) = pair_flags(rows, lengths)
    assert flag.startswith("length bias: the chosen answer is the longer one in 100%")
    assert "mean 34 tokens chosen, 6 rejected" in flag


def test_balanced_pairs_raise_no_flag():
    rows = [
        pair(i, f"What is {i} * 2?", f"{2 * i}" if i % 2 else f"It is {2 * i}.",
             f"It is {2 * i + 1}." if i % 2 else f"{2 * i + 1}")
        for i in range(12)
    ]  # fmt: skip
    assert pair_flags(rows) == []
