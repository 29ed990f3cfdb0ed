"""KTO on a thumbs-up/down file as a product exports it: its own column names (question,
bot_reply, rating with 👍/👎), unicode, a conversation prompt among text ones. The trainer's own
batches, decoded with the real Qwen3 tokenizer, are exactly the rows `data check` shows, and
those are the model's own template applied to the user's rows; TRL's real KTOTrainer trains two
steps on the Qwen3 stand-in with LoRA (the base, adapter off, as the reference), changes the
adapter, keeps traces of the decoded trained text with the rater's verdict, and resumes from its
checkpoint as the dry run does. Real TRL, real tokenizer, no hub."""

import json

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data.dataset import read_rows
from posttrain.data.kto_rows import kto_columns, kto_row
from posttrain.data.kto_settings import KtoSpec
from posttrain.spec.schema import load_spec
from tests.conftest import offline_in
from tests.specs import feedback_spec

pytestmark = pytest.mark.slow

TOPICS = ["le café", "Zürich", "naïve Bayes", "日本の桜", "piñata", "the Moon"]
GEN = "<|im_start|>assistant\n<think>\n\n</think>\n\n"  # Qwen3's turn, thinking off


def export() -> list[dict]:
    rows = []
    for i, topic in enumerate(TOPICS * 2):
        question = f"Explain {topic} to a child (#{i})."
        prompt = (
            [{"role": "system", "content": "Réponds brièvement."},
             {"role": "user", "content": question}]
            if i == 3 else question
        )  # fmt: skip
        good = i % 3 != 0
        reply = f"{topic.capitalize()} is a lovely thing! 🙂" if good else f"{topic}. Next."
        rows.append({"ticket": f"t{i}", "question": prompt, "bot_reply": reply,
                     "rating": "👍" if good else "👎"})  # fmt: skip
    return rows


SPEC = feedback_spec(
    dataset={"holdout_share": 0.0},
    steps=2,
    batch_size=4,
    learning_rate=1e-3,
    max_prompt_length=64,
    max_completion_length=16,
    save_every=1,
    traces={"samples": 2},
)


@pytest.fixture(scope="module")
def project(tmp_path_factory, empty_hf_home):
    root = tmp_path_factory.mktemp("feedback")
    (root / "feedback.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in export()), encoding="utf-8"
    )
    with offline_in(root, tmp_path_factory, empty_hf_home):
        yield root


@pytest.fixture(scope="module")
def parts(project):
    from posttrain.gpu import tokenizers
    from posttrain.gpu.standin import stand_in_path

    spec = load_spec(SPEC)
    raw = read_rows(project / "feedback.jsonl")
    answer = kto_columns(spec.dataset, raw, "rating")[0]
    rows = [kto_row(r, spec.dataset, "rating", answer) for r in raw]
    tokenizer = tokenizers.load_tokenizer(spec.model.name).tokenizer
    return spec, rows, tokenizer, str(stand_in_path(spec.model.name))


def job_for(parts, out, **changes):
    from posttrain.gpu.reporter import Reporter
    from posttrain.gpu.trainers import Device, Job

    spec, rows, tokenizer, model = parts
    if changes:
        spec = load_spec({**SPEC, "algorithm": {**SPEC["algorithm"], **changes}})
    return Job(spec, model, tokenizer, rows, out, Reporter(out), Device.detect(), None)


def refused_by(parts, out, build, match: str) -> None:
    """`build(job)` refuses the job's rows or spec with a ConfigError matching `match`."""
    job = job_for(parts, out)
    try:
        with pytest.raises(ConfigError, match=match):
            build(job)
    finally:
        job.reporter.close()


def test_kto_settings_defaults_are_the_installed_trls():
    from trl import KTOConfig

    trl = KTOConfig(output_dir="/tmp/unused", use_cpu=True, bf16=False)
    ours = KtoSpec()
    assert (ours.beta, ours.desirable_weight, ours.undesirable_weight, ours.loss_type) == (
        trl.beta,
        trl.desirable_weight,
        trl.undesirable_weight,
        trl.loss_type,
    )


def test_the_trainers_batches_decode_to_exactly_the_rows_data_check_shows(project, parts):
    """The oracle: the trainer's collated batches, split by its completion mask, against
    `data check`; and what `data check` shows against the model's template applied by hand
    to the user's raw rows."""
    from posttrain.gpu.kto_check import check_feedback
    from posttrain.gpu.kto_trainer import kto_trainer

    spec, rows, tokenizer, _ = parts
    a = spec.algorithm
    limit = a.max_prompt_length + a.max_completion_length
    shown, problems, _ = check_feedback(
        rows, [], tokenizer, spec.model.template_kwargs(), limit, 100, "rating"
    )
    [flag] = problems  # 8 up, 4 down
    assert flag.startswith("strong imbalance: 8 desirable to 4 undesirable answers (2.0:1)")
    assert "`algorithm.kto.undesirable_weight: 2`" in flag
    job = job_for(parts, project / "batches")
    try:
        trainer = kto_trainer(job)
        seen, kl_seen = [], []
        for batch in trainer.get_train_dataloader():
            answers, kl_answers = [], []
            for i in range(len(batch["input_ids"])):
                keep = batch["attention_mask"][i].bool()
                ids = batch["input_ids"][i][keep].tolist()
                n = len(ids) - int(batch["completion_mask"][i].sum())
                seen.append((tokenizer.decode(ids[:n]), tokenizer.decode(ids[n:]),
                             bool(batch["label"][i])))  # fmt: skip
                kl_keep = batch["KL_attention_mask"][i].bool()
                kl = batch["KL_input_ids"][i][kl_keep].tolist()
                kl_seen.append(tokenizer.decode(kl[:n]))
                answers.append(ids[n:])
                kl_answers.append(kl[n:])
            assert kl_answers == answers[-1:] + answers[:-1]  # TRL's rotation in the batch
    finally:
        job.reporter.close()
    expected = []
    for s in shown:  # the collator cuts prompt + answer at max_length, keeping the start
        room = limit - s.prompt_tokens
        ids = tokenizer(s.completion, add_special_tokens=False)["input_ids"][:room]
        expected.append((s.prompt, tokenizer.decode(ids), s.label))
    assert sorted(seen) == sorted(expected) and len(seen) == len(rows)
    assert [p for p, _, _ in seen] == kl_seen  # each KL row keeps its own prompt
    assert {label for _, _, label in seen} == {True, False}

    raw = {r["ticket"]: r for r in read_rows(project / "feedback.jsonl")}
    by_id = {r["id"]: r for r in rows}
    kwargs = spec.model.template_kwargs()
    for s in shown:
        user = raw[by_id[s.id]["ticket"]]
        q = user["question"]
        messages = q if isinstance(q, list) else [{"role": "user", "content": q}]
        whole = [*messages, {"role": "assistant", "content": user["bot_reply"]}]
        assert s.prompt + s.completion == tokenizer.apply_chat_template(
            whole, tokenize=False, **kwargs
        )
        assert s.prompt.endswith(GEN)
        assert s.label is (user["rating"] == "👍")


def test_two_kto_steps_train_the_adapter_trace_the_trained_rows_and_resume(project, parts):
    import torch

    from posttrain.gpu.phases import train_phase as run_kto  # the kind's trainer, named once

    out = project / "run"
    job = job_for(parts, out)
    try:
        trainer = run_kto(job)
        lora_b = [p for n, p in trainer.model.named_parameters() if "lora_B" in n]
        assert lora_b and any(torch.count_nonzero(p) for p in lora_b)  # B starts at zero
        assert trainer.state.global_step == 2
        longer = load_spec({**SPEC, "algorithm": {**SPEC["algorithm"], "steps": 3}})
        resumed = run_kto(job.but(spec=longer), resume=str(out / "checkpoint-2"), proof=False)
        assert resumed.state.global_step == 3
    finally:
        job.reporter.close()
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    logs = [e["message"] for e in events if e["type"] == "log"]
    assert any("train KTO (kto, beta 0.1" in m and "adapter off" in m for m in logs)
    steps = [e for e in events if e["type"] == "metrics" and e["phase"] == "train"]
    assert steps and all({"loss", "kl"} <= set(e) for e in steps)
    traces = [json.loads(line) for line in (out / "traces" / "step_0001.jsonl").open()]
    assert len(traces) == 2
    for t in traces:
        assert t["trained"].startswith(t["rendered"])  # the prompt as the trainer reads it
        verdict = "⟦desirable 👍⟧" if "⟦desirable 👍⟧" in t["trained"] else "⟦undesirable 👎⟧"
        prompt, answer = t["trained"].split(verdict)
        assert prompt.endswith(GEN) and "<|im_start|>user\n" in prompt
        row = next(r for r in parts[1] if r["prompt_text"] == t["prompt"])
        assert answer == row["completion"][0]["content"] + "<|im_end|>\n"
        assert (verdict == "⟦desirable 👍⟧") is row["label"]


def test_a_batch_of_one_row_a_gpu_is_refused_naming_the_field_and_the_fix(project, parts):
    from posttrain.gpu.kto_trainer import kto_trainer

    for batch, gpu in ((1, "H100"), (2, "H100:2")):  # the spec refuses it, before any GPU
        with pytest.raises(ConfigError, match=r"algorithm\.batch_size .* apo_zero_unpaired"):
            load_spec({**SPEC, "algorithm": {**SPEC["algorithm"], "batch_size": batch},
                       "compute": {"backend": "modal", "gpu": gpu}})  # fmt: skip
    without_kl = {**SPEC["algorithm"], "batch_size": 1, "kto": {"loss_type": "apo_zero_unpaired"}}
    assert load_spec({**SPEC, "algorithm": without_kl}).algorithm.batch_size == 1
    spec, rows, tokenizer, model = parts  # the trainer refuses it too, should a spec slip by
    one = spec.model_copy(update={"algorithm": spec.algorithm.model_copy(update={"batch_size": 1})})
    refused = r"algorithm\.batch_size 1 .* apo_zero_unpaired"
    refused_by((one, rows, tokenizer, model), project / "one", kto_trainer, refused)


def test_an_unreadable_label_is_refused_by_the_trainer_naming_the_row(project, parts):
    from posttrain.gpu.kto_trainer import kto_examples

    spec, rows, tokenizer, model = parts
    broken = [{**rows[0], "label": None, "label_value": "5 stars"}, *rows[1:]]
    refused = rf"row {rows[0]['id']!r}: '5 stars'"
    refused_by((spec, broken, tokenizer, model), project / "unread", kto_examples, refused)


def test_answer_logliks_score_the_answer_tokens_kto_trains_on(parts):
    """evaluate's arms against a straightforward computation: every position's logits, the
    answer's tokens (after the rendered prompt, the end of turn included) averaged."""
    import torch
    from transformers import AutoModelForCausalLM

    from posttrain.gpu.kto_likelihood import answer_logliks
    from posttrain.gpu.kto_text import KtoRenderer

    spec, rows, tokenizer, path = parts
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    kwargs = spec.model.template_kwargs()
    got = answer_logliks(model, tokenizer, rows[:4], kwargs, batch=3)
    for row, value in zip(rows[:4], got, strict=True):
        ids = KtoRenderer(tokenizer, kwargs).encode_row(row)
        whole = torch.tensor([ids.prompt_ids + ids.completion_ids])
        with torch.inference_mode():
            logp = torch.log_softmax(model(input_ids=whole).logits[0].float(), -1)
        start = len(ids.prompt_ids)
        picked = [logp[p - 1, whole[0, p]] for p in range(start, whole.size(1))]
        assert value == pytest.approx(float(torch.stack(picked).mean()), abs=1e-4)


@pytest.mark.parametrize(
    ("up", "down", "weights"),
    [(90, 10, (1.0, 1.0)), (10, 30, (1.0, 1.0)), (10, 30, (3.5, 1.0)), (20, 4, (1.0, 5.0)),
     (7, 5, (1.0, 1.0)), (50, 50, (1.0, 1.0))],
)  # fmt: skip
def test_the_imbalance_advice_is_trls_own_check(up, down, weights):
    """The contract: TRL's KTOTrainer._prepare_dataset (its own code, on a word-level
    tokenizer) warns exactly when `balancing` says the weights are out of range, with the
    same ranges."""
    import logging
    import re
    import types

    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl import KTOConfig
    from trl.trainer import kto_trainer as trl_kto

    from posttrain.data.thumbs import balancing

    words = Tokenizer(models.WordLevel({"?": 0, "a": 1, "b": 2, "</s>": 3}, unk_token="?"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=words, eos_token="</s>", pad_token="</s>")
    args = KTOConfig(output_dir="/tmp/unused", use_cpu=True, bf16=False, max_length=None)
    trainer = types.SimpleNamespace(  # the attributes _prepare_dataset reads of its trainer
        calculate_KL=False, _tokenizer=tok, desirable_weight=weights[0],
        undesirable_weight=weights[1],
    )  # fmt: skip
    rows = [{"prompt": "a", "completion": " b", "label": i < up} for i in range(up + down)]
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(trl_kto.__name__)
    logger.addHandler(handler)
    # a trainer earlier in this process may have quieted TRL (posttrain.gpu.reporter's
    # quiet_libraries sets the `trl` logger to ERROR): hear its warnings for this call
    quieted = logging.getLogger("trl").level
    logging.getLogger("trl").setLevel(logging.WARNING)
    try:
        trl_kto.KTOTrainer._prepare_dataset(trainer, Dataset.from_list(rows), tok, args, "train")
    finally:
        logger.removeHandler(handler)
        logging.getLogger("trl").setLevel(quieted)
    ours = balancing(up, down, *weights)
    warned = [m for m in said if "ideal range" in m]
    assert bool(warned) is not ours.in_range
    if warned:
        ranges = re.findall(r"\[([\d.]+), ([\d.]+)\]", warned[0])
        assert [tuple(map(float, r)) for r in ranges] == [
            ours.desirable_range,
            ours.undesirable_range,
        ]


def test_data_check_renders_an_empty_answer_and_flags_it_by_row(parts):
    from posttrain.gpu.kto_check import check_feedback, shown

    spec, rows, tokenizer, _ = parts
    emptied = [{**rows[1], "completion": [{"role": "assistant", "content": ""}]}, *rows[2:]]
    samples, problems, tokens = check_feedback(
        emptied, [], tokenizer, spec.model.template_kwargs(), 80, 2, "rating"
    )
    [flag] = [p for p in problems if "empty answer" in p]
    assert flag.startswith(f"1 of {len(emptied)} rows") and repr(rows[1]["id"]) in flag
    assert samples[0].completion == "<|im_end|>\n"  # the end of turn alone is trained
    assert "--- answer ⟦desirable 👍⟧ (2 tokens) ---" in shown(samples[0])
    assert len(tokens["prompt"]) == len(emptied)
