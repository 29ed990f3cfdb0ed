"""The spec's batch is the batch of all GPUs together: each trainer process takes its share,
as TRL's own configs receive it (built here without training), and a batch that does not
divide among the processes is refused naming its field."""

import pytest

from posttrain.algorithms.kinds import algorithm_of
from posttrain.core.errors import ConfigError
from posttrain.gpu import ranks
from posttrain.gpu.models import Device
from posttrain.gpu.reporter import Reporter
from posttrain.gpu.trainers import Job, SftSettings, grpo_config, sft_trainer
from posttrain.spec.schema import load_spec
from tests.specs import tiny


def job_for(spec, tmp_path) -> Job:
    """A job of the tiny model on its own rows (the trainer's tokenizer); nothing loaded."""
    from posttrain.gpu.train import tokenizer_for

    rows = algorithm_of(spec).prepare(spec.dataset).train
    tokenizer = tokenizer_for(spec).tokenizer
    reporter = Reporter(tmp_path)
    return Job(spec, "unused", tokenizer, rows, tmp_path / "out", reporter, Device.detect(), None)


@pytest.fixture
def four_processes(monkeypatch):
    """This process as one of four data-parallel ranks. Only our reading of WORLD_SIZE is
    replaced: with WORLD_SIZE=4 in its environment, TRL's config would start a process group."""
    monkeypatch.setattr(ranks, "world_size", lambda: 4)


def test_world_size_is_what_torchrun_and_accelerate_set(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert ranks.world_size() == 1
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert ranks.world_size() == 4
    assert ranks.device_batch(64) == 16


def test_in_four_processes_grpos_config_takes_a_quarter_of_the_batch_and_keeps_whole_groups(
    four_processes, tmp_path
):
    spec = load_spec(tiny(batch_size=64, num_generations=8))
    config = grpo_config(job_for(spec, tmp_path))
    assert config.per_device_train_batch_size == 16
    # TRL's rule at four processes: the generation batch, 16 x 4, holds whole groups of 8
    assert config.per_device_train_batch_size * 4 == 64 and 64 % config.num_generations == 0


def test_alone_grpos_config_takes_the_whole_batch(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    spec = load_spec(tiny(batch_size=64, num_generations=8))
    assert grpo_config(job_for(spec, tmp_path)).per_device_train_batch_size == 64


def test_in_four_processes_a_grpo_batch_that_does_not_divide_is_refused_naming_it(
    four_processes, tmp_path
):
    spec = load_spec(tiny(batch_size=18, num_generations=6))
    with pytest.raises(ConfigError) as refused:
        grpo_config(job_for(spec, tmp_path))
    assert str(refused.value) == (
        "algorithm.batch_size 18 is the batch of all 4 GPUs together and must divide among "
        "them and stay a multiple of num_generations (6): use 12 or 24, or a GPU count that "
        "divides 18"
    )


def test_in_four_processes_a_warmstart_batch_that_does_not_divide_is_refused_naming_it(
    four_processes, tmp_path
):
    spec = load_spec(tiny(kind="sft"))  # the warm-start is an SFT phase of its own batch
    settings = SftSettings("warmstart", 2, 1e-3, 30, "cosine", lora=False)
    with pytest.raises(ConfigError, match=r"^algorithm\.warmstart\.batch_size 30 is the batch"):
        sft_trainer(job_for(spec, tmp_path), settings)


def test_in_four_processes_the_sft_trainer_takes_a_quarter_of_the_batch(four_processes, tmp_path):
    from posttrain.gpu.models import resolve_model

    spec = load_spec(tiny(kind="sft", batch_size=32))
    job = job_for(spec, tmp_path).but(model_path=resolve_model(spec))
    settings = SftSettings("train", 1, 1e-3, 32, "constant", lora=False)
    assert sft_trainer(job, settings).args.per_device_train_batch_size == 8
