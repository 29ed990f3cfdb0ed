"""On-policy distillation: a teacher of another tokenizer is refused before anything starts,
by every verb, naming both; a dry run of a same-family spec trains the stand-in student
against a stand-in teacher with other weights (a divergence that is not 0); the plan prices
the teacher's forward passes by its size. Real TRL, real tokenizers, a user's own file."""

import json

import pytest

from posttrain.core.errors import ConfigError
from tests.conftest import offline_in, wait_finished

pytestmark = pytest.mark.slow


def spec(teacher: str, **compute) -> dict:
    return {
        "model": "Qwen3-0.6B",
        "dataset": {"path": "q.jsonl", "prompt_column": "frage"},
        "algorithm": {"kind": "distill", "teacher": teacher, "steps": 50, "batch_size": 8},
        **({"compute": compute} if compute else {}),
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory, empty_hf_home):
    root = tmp_path_factory.mktemp("distill")
    rows = [{"frage": f"Wie viel ist {i} + {i + 1}? Antworte kurz.", "antwort": str(2 * i + 1)}
            for i in range(30)]  # fmt: skip
    (root / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with offline_in(root, tmp_path_factory, empty_hf_home) as home:
        yield home


def test_a_teacher_of_another_tokenizer_is_refused_by_every_verb_naming_both(project):
    from posttrain.tools.data import check_dataset
    from posttrain.tools.launch import launch, smoke_run
    from posttrain.tools.plan import plan

    bad = spec("SmolLM2-135M-Instruct")
    for verb in (plan, check_dataset, smoke_run, launch):
        with pytest.raises(ConfigError) as caught:
            verb(bad)
        message = str(caught.value)
        assert "'SmolLM2-135M-Instruct' reads with SmolLM2's 49,152-token vocabulary" in message
        assert "'Qwen3-0.6B' with the qwen3 family's 151,669-token vocabulary" in message
    with pytest.raises(ConfigError, match=r"qwen2\.5 family's 151,665-token"):
        plan(spec("Qwen2.5-1.5B-Instruct"))
    runs = project / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing started, nothing written


def test_the_trainer_compares_the_tokenizers_where_the_family_is_unknown(project):
    from posttrain.gpu.distill_trainer import check_vocabularies
    from posttrain.gpu.tokenizers import load_tokenizer

    qwen = load_tokenizer("Qwen3-0.6B").tokenizer
    smol = load_tokenizer("SmolLM2-135M-Instruct").tokenizer
    check_vocabularies(qwen, load_tokenizer("Qwen3-4B").tokenizer, ("Qwen3-0.6B", "Qwen3-4B"))
    with pytest.raises(ConfigError, match=r"another tokenizer than the student 'Qwen3-0.6B'"):
        check_vocabularies(qwen, smol, ("Qwen3-0.6B", "my/teacher"))


def test_the_plan_prices_the_teachers_forward_passes_by_its_size(project):
    from posttrain.models.calibration import KL_FLOPS, fitted, gpu_perf
    from posttrain.models.catalog import get_preset
    from posttrain.tools.plan import plan

    small = plan(spec("Qwen3-0.6B", backend="modal", gpu="H100"))
    big = plan(spec("Qwen3-8B", backend="modal", gpu="H100"))
    # the teacher's forward pass over the step's tokens (8 x (128 + 256)), at the fitted MFU;
    # beside HF generate's 256 sequential decoding steps it is a small share of the step
    params = get_preset("Qwen3-8B").n_params - get_preset("Qwen3-0.6B").n_params
    flops_per_s = gpu_perf("H100")[0] * 1e12 * fitted().training_mfu
    extra = KL_FLOPS * params * 8 * (128 + 256) / flops_per_s
    assert big.cost.step_s - small.cost.step_s == pytest.approx(extra, rel=0.02, abs=2e-3)
    assert extra > 0.1
    note = next(w for w in big.warnings if w.startswith("distillation:"))
    assert "the teacher Qwen3-8B" in note and "of a step's training compute" in note
    assert "DISTILL is priced as a GRPO step" in big.cost.basis
    assert big.fit["need_gb"] > small.fit["need_gb"] + 10  # its bf16 weights: 16 GB


def test_a_dry_run_trains_the_student_against_a_teacher_with_other_weights(project):
    from posttrain.tools.launch import smoke_run
    from posttrain.tools.runs import get_run

    result = smoke_run(spec("Qwen3-4B"))
    detail = wait_finished(result.run_id, 400)
    assert detail.status == "succeeded", detail.cause
    dry = get_run(result.run_id).dry_run
    assert any("stand-in teacher" in line for line in dry["proved"])
    assert any("that the teacher teaches" in line for line in dry["cannot_prove"])
    metrics = [m for m in get_run(result.run_id, verbose=True).metrics if m["phase"] == "train"]
    assert metrics and all(m["loss"] > 0 and m["grad_norm"] > 0 for m in metrics)
