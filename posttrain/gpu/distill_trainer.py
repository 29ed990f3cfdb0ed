"""On-policy distillation through TRL's DistillationTrainer: the student (peft LoRA) samples
its own answers to the spec's prompts, and learns the teacher's next-token distribution on
them (a generalised Jensen-Shannon divergence; TRL's default, reverse KL). No reward: traces
show the student's samples.

The teacher must read with the student's tokenizer. The spec refuses a teacher of another
known family before anything starts (posttrain.models.catalog.teacher_mismatch); here, with
both tokenizers loaded, the vocabularies themselves are compared before the teacher's weights
load, which covers teachers whose family posttrain cannot name.
"""

from __future__ import annotations

from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.gpu.callback import ReportingCallback
from posttrain.gpu.ranks import device_batch
from posttrain.gpu.reporter import ROW, trace_steps
from posttrain.gpu.trainers import (
    Job,
    common_config,
    held_out,
    lora_config,
    schedule,
    silence_printer,
    trace_samples,
)
from posttrain.spec.schema import RunSpec

TEACHER_STAND_IN_SEED = 1


def teacher_path(spec: RunSpec) -> str:
    """Where the teacher's weights load from, resolved as the student's are: a stand-in of its
    family in a dry run, packaged or converted weights, a hub id or a local folder."""
    from posttrain.gpu.models import resolve_model

    teacher = spec.algorithm.teacher
    assert teacher is not None
    if spec.model.stand_in:  # other random weights than the student's, or the divergence is 0
        from posttrain.gpu.standin import stand_in_path

        return str(stand_in_path(teacher, seed=TEACHER_STAND_IN_SEED))
    model = spec.model.model_copy(update={"name": teacher})
    return resolve_model(spec.model_copy(update={"model": model}))


def check_vocabularies(student: Any, teacher: Any, names: tuple[str, str]) -> None:
    """Refuse a teacher whose tokenizer maps tokens to other ids than the student's."""
    mine, theirs = student.get_vocab(), teacher.get_vocab()
    if mine != theirs:
        differ = sorted(set(mine.items()) ^ set(theirs.items()), key=str)[:3]
        raise ConfigError(
            f"algorithm.teacher '{names[1]}' has another tokenizer than the student "
            f"'{names[0]}' ({len(theirs):,} tokens against {len(mine):,}; e.g. {differ}): "
            f"distillation compares their next-token distributions token for token. Pick a "
            f"teacher of the student's family"
        )


def distill_trainer(job: Job, extra_callbacks: tuple[Any, ...] = (), proof: bool = True) -> Any:
    """TRL's DistillationTrainer: the student learns the teacher's distribution on its own
    samples; not trained."""
    from datasets import Dataset
    from trl import DistillationConfig, DistillationTrainer

    from posttrain.gpu.models import load_tokenizer

    spec, a = job.spec, job.spec.algorithm
    teacher = teacher_path(spec)
    check_vocabularies(job.tokenizer, load_tokenizer(teacher), (spec.model.name, a.teacher or ""))
    dataset = Dataset.from_list([{"prompt": r["prompt"], ROW: i} for i, r in enumerate(job.rows)])
    config = DistillationConfig(
        per_device_train_batch_size=device_batch(a.batch_size),
        max_completion_length=a.max_completion_length,
        temperature=a.temperature,
        learning_rate=a.learning_rate,
        **schedule(a),
        chat_template_kwargs=spec.model.template_kwargs(),
        # TRL reads the teacher's dtype by name (getattr(torch, name)), the student's as a dtype
        teacher_model_init_kwargs={"dtype": job.device.dtype("frozen")},
        remove_unused_columns=False,
        **common_config(job, a.steps, save=True),
    )
    steps_to_trace = trace_steps(a.traces, a.steps)
    picked = job.rows[: a.traces.samples]

    def trace_step(step: int) -> None:
        if step in steps_to_trace:
            trace_samples(job, trainer.model, picked, step, "train")

    trainer = DistillationTrainer(
        model=job.model_path,
        teacher_model=teacher,
        args=config,
        train_dataset=dataset,
        processing_class=job.tokenizer,
        peft_config=lora_config(spec) if a.lora else None,
        callbacks=[
            ReportingCallback(job.reporter, "train", on_step=trace_step, proof=proof),
            *held_out(job, "train"),
            *extra_callbacks,
        ],
    )
    silence_printer(trainer)
    job.reporter.log(
        f"train distillation from teacher {a.teacher} ({teacher}): the student samples, "
        f"the teacher's next-token distribution is the target"
    )
    return trainer
