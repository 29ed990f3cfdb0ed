"""algorithm.warmup_steps: the learning rate rises from 0 over the first steps of the main
phase, then follows lr_scheduler, in every trainer (read from the real trainers' own logs and
arguments, not from our config). Why it exists: Adam's first step moves every weight by about
the learning rate whatever its gradient (m/sqrt(v) is g/|g| at step 1), measured here on the
tiny model, so a full fine-tune at a high rate can leave its start in one step."""

from __future__ import annotations

import pytest
import torch

from posttrain.core.errors import ConfigError
from posttrain.gpu.models import Device
from posttrain.gpu.phases import train_phase
from tests.gpu.test_precision import dpo_job, job_for, layer_weights, tiny_spec

pytestmark = pytest.mark.slow
CPU = Device(cuda=False, bf16=False, name="cpu")
LR = 1e-3
UNEVEN = """
def uneven(completions, **columns):  # differs within a group of the untrained model's answers
    return [(len(str(c)) % 5) / 4 for c in completions]
"""


def logged_rates(trainer) -> list[float]:
    return [row["learning_rate"] for row in trainer.state.log_history if "learning_rate" in row]


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_the_rate_rises_from_zero_over_the_warmup_then_holds(kind, tmp_path):
    spec = tiny_spec(kind, steps=4, warmup_steps=2, learning_rate=LR, save_every=0)
    job = job_for(spec, CPU, tmp_path)
    trainer = train_phase(job, proof=False)
    job.reporter.close()
    assert trainer.args.warmup_steps == 2
    # the rate each step trained at: 0 and LR/2 during the warmup, then the constant LR
    assert logged_rates(trainer) == pytest.approx([0.0, LR / 2, LR, LR])


def test_dpo_takes_the_same_schedule(tmp_path):
    from posttrain.gpu.dpo_trainer import dpo_trainer

    job = dpo_job(tmp_path, CPU, steps=4, warmup_steps=3, lr_scheduler="linear")
    trainer = dpo_trainer(job, proof=False)
    job.reporter.close()
    assert (trainer.args.warmup_steps, trainer.args.lr_scheduler_type) == (3, "linear")


class FirstStep:
    """A trainer callback: how far step 1 moved each decoder weight."""

    def __init__(self):
        self.before, self.moved = None, None

    def __getattr__(self, event):  # every other TrainerCallback event: nothing to do
        return lambda *args, **kwargs: None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.before = layer_weights(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == 1:
            after = layer_weights(model)
            self.moved = torch.cat(
                [(a - b).abs().flatten() for a, b in zip(after, self.before, strict=True)]
            )


def test_without_a_warmup_adams_first_step_moves_every_weight_by_about_the_rate(tmp_path):
    """What the warmup is for, on the real GRPO trainer: step 1 at LR with no warmup moves
    the decoder's weights by ~LR each (the tiny model's weights are ~0.02 in size); the
    warmup's first step moves none."""
    from posttrain.gpu.trainers import run_grpo

    (tmp_path / "uneven.py").write_text(UNEVEN)
    moved = {}
    for warmup in (None, 2):
        spec = tiny_spec("grpo", steps=3, warmup_steps=warmup, learning_rate=LR)
        spec = spec.model_copy(
            update={
                "reward": spec.reward.model_copy(
                    update={"name": f"{tmp_path / 'uneven.py'}:uneven"}
                )
            }
        )
        job = job_for(spec, CPU, tmp_path / str(warmup))
        probe = FirstStep()
        run_grpo(job, extra_callbacks=(probe,), proof=False)
        job.reporter.close()
        moved[warmup] = probe.moved
    assert float(moved[None].median()) > 0.5 * LR  # ~LR: the sign of the gradient, times LR
    assert float(moved[2].max()) == 0.0


def test_a_warmup_as_long_as_the_run_is_refused_naming_both_fields():
    with pytest.raises(ConfigError, match=r"algorithm\.warmup_steps \(100\).*algorithm\.steps"):
        tiny_spec("grpo", steps=100, warmup_steps=100)
