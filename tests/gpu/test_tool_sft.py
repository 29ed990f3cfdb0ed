"""Tool-calling SFT trains on exactly the text the user sees: the trainer's own batches,
decoded with the real Qwen2.5 tokenizer, byte for byte against `data check`, on rows with
both call shapes, schemas whose keys differ from row to row, unicode, multi-turn chats and
a reference column of dicts. Real TRL, the real tokenizer, the user's own spec file."""

from pathlib import Path

import pytest

from posttrain.data import tool_gym
from posttrain.data.dataset import prepare, read_rows
from posttrain.gpu import tokenizers
from posttrain.spec.schema import load_spec
from posttrain.tools.data import check_dataset
from tests.conftest import own_rendering

pytestmark = pytest.mark.slow

ROWS = 24


@pytest.fixture(scope="module")
def project(tmp_path_factory, empty_hf_home):
    """The user's folder (their data and spec), offline, an empty Hugging Face cache."""
    root = tmp_path_factory.mktemp("tools")
    tool_gym.write(root, n=ROWS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSTTRAIN_HOME", str(tmp_path_factory.mktemp("home")))
        mp.setenv("HF_HOME", str(empty_hf_home))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.chdir(root)
        tokenizers._load.cache_clear()
        yield root
        tokenizers._load.cache_clear()


def trainer_for(spec, rows, out: Path):
    """TRL's SFTTrainer as the run builds it (posttrain.gpu.trainers.sft_trainer), on the
    stand-in of the spec's model; not trained."""
    from posttrain.gpu.reporter import Reporter
    from posttrain.gpu.standin import stand_in_path
    from posttrain.gpu.trainers import Device, Job, SftSettings, sft_trainer

    tokenizer = tokenizers.load_tokenizer(spec.model.name).tokenizer
    reporter = Reporter(out)
    job = Job(
        spec, str(stand_in_path(spec.model.name)), tokenizer, rows, out, reporter,
        Device.detect(), None,
    )  # fmt: skip
    settings = SftSettings("train", 1, 1e-4, 5, "constant", lora=True)
    return sft_trainer(job, settings), reporter


def test_the_trainers_own_batches_decode_to_exactly_what_data_check_shows(project, tmp_path):
    from posttrain.gpu.sft_text import decode_trained

    spec = load_spec("tool_sft.yaml")
    train = prepare(spec.dataset, "targets").train
    report = check_dataset("tool_sft.yaml", samples=ROWS)
    assert report.problems == []
    assert report.sample_ids == [r["id"] for r in train]  # every training row is shown

    trainer, reporter = trainer_for(spec, train, tmp_path)
    try:
        tokenizer = trainer.processing_class
        seen = []
        for batch in trainer.get_train_dataloader():
            for ids, labels in zip(batch["input_ids"], batch["labels"], strict=True):
                ids, labels = ids.tolist(), labels.tolist()
                while ids and ids[-1] == tokenizer.pad_token_id and labels[-1] == -100:
                    ids, labels = ids[:-1], labels[:-1]  # the collator's right padding
                seen.append(decode_trained(tokenizer, ids, labels))
    finally:
        reporter.close()
    assert len(seen) == len(train)
    assert sorted(t.text for t in seen) == sorted(report.samples)
    assert sorted(t.marked for t in seen) == sorted(report.marked_samples)

    # ...and what data check shows is the user's rows as the model's own template renders
    # them, calls in either shape reduced to one, nothing added and nothing double-encoded
    raw = {r["id"]: r for r in read_rows("tool_chats.jsonl")}
    for row_id, text, marked in zip(
        report.sample_ids, report.samples, report.marked_samples, strict=True
    ):
        assert text == own_rendering(tokenizer, raw[row_id])
        assert "null" not in text and '"arguments": "' not in text
        turns = text.count("<|im_start|>assistant")
        assert turns == marked.count("<|im_start|>assistant⟦") >= 1  # each turn carries loss
        assert marked.count("⟦") == turns  # and nothing else does


def test_a_table_built_by_from_list_would_corrupt_these_rows_and_the_check_would_see_it(project):
    """The trap the trainer no longer falls into, shown on the same rows: the oracle above
    catches it."""
    from datasets import Dataset

    tokenizer = tokenizers.load_tokenizer("Qwen2.5-1.5B-Instruct").tokenizer
    spec = load_spec("tool_sft.yaml")
    train = prepare(spec.dataset, "targets").train
    table = Dataset.from_list([{"tools": r["tools"]} for r in train])
    unified = tokenizer.apply_chat_template(
        train[0]["prompt"] + train[0]["completion"], tools=table[0]["tools"], tokenize=False
    )
    assert "null" in unified
    raw = {r["id"]: r for r in read_rows("tool_chats.jsonl")}
    assert unified != own_rendering(tokenizer, raw[train[0]["id"]])


def test_the_loss_choice_moves_the_marks_and_never_the_text(project):
    base = load_spec("tool_sft.yaml").model_dump(mode="json")
    reports = {}
    for loss in ("assistant_turns", "last_turn", "all_tokens"):
        spec = {**base, "algorithm": {**base["algorithm"], "sft_loss": loss}}
        reports[loss] = check_dataset(spec, samples=ROWS)
    texts = {loss: r.samples for loss, r in reports.items()}
    assert texts["assistant_turns"] == texts["last_turn"] == texts["all_tokens"]
    multi = next(
        i for i, t in enumerate(texts["last_turn"]) if t.count("<|im_start|>assistant") == 2
    )
    assert reports["assistant_turns"].marked_samples[multi].count("⟦") == 2
    assert reports["last_turn"].marked_samples[multi].count("⟦") == 1
    everything = reports["all_tokens"].marked_samples[multi]
    assert everything.startswith("⟦<|im_start|>system") and everything.endswith("⟧")
    assert "every assistant turn" in reports["assistant_turns"].loss
