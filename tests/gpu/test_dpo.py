"""DPO on a preference file written as a user writes one: their own column names, prompts as
text in some rows and as conversations in others, unicode, and the pairs that make DPO fail
silently (identical, whitespace-only, empty, contradicting, different only past the
truncation length). `data check` flags each; the trainer's own batches, decoded with the real
Qwen3 tokenizer, are exactly the pairs it shows, and those are the model's own template
applied to the user's rows; the dry run of a Qwen3 DPO spec succeeds offline and reports the
margin, the preference accuracy and the chosen answers' likelihood. Real TRL, real
tokenizer, the user's own spec."""

import json

import pytest

from posttrain.data.dataset import prepare, read_rows
from posttrain.spec.schema import load_spec
from posttrain.tools.data import check_dataset
from tests.conftest import offline_in, wait_finished

pytestmark = pytest.mark.slow

TOPICS = ["le café", "Zürich", "naïve Bayes", "日本の桜", "piñata", "the Moon", "Kraków", "jazz"]
SHARED = " ".join(["This long shared opening sentence repeats before the answers part."] * 12)


def rows() -> list[dict]:
    out = []
    for i, topic in enumerate(TOPICS * 2):
        question = f"Explain {topic} to a child (#{i})."
        if i % 2:  # TRL's conversational form, with a system turn
            prompt = [
                {"role": "system", "content": "Réponds brièvement — be brief."},
                {"role": "user", "content": question},
            ]
        else:
            prompt = question
        # lengths alternate, so no length bias: what DPO learns here is the tone
        warm, cold = f"{topic.capitalize()} is a lovely thing to learn about! 🙂", f"{topic}. Next."
        better, worse = (warm, cold) if i % 4 < 2 else (f"Sure: {topic}.", f"No. {topic} bores me")
        out.append(
            {"id": f"p{i}", "instruction": prompt, "preferred": better, "dispreferred": worse}
        )
    out[2]["dispreferred"] = out[2]["preferred"]  # identical
    out[4]["dispreferred"] = out[4]["preferred"]
    out[6]["dispreferred"] = out[6]["preferred"].replace(" ", "  ")  # whitespace only
    out[8]["preferred"] = ""  # empty
    out.append(  # the same prompt as p0, its answers swapped: contradicting preferences
        {**out[0], "id": "p0-again", "preferred": out[0]["dispreferred"],
         "dispreferred": out[0]["preferred"]}
    )  # fmt: skip
    out.append(  # answers that differ only past max_prompt_length + max_completion_length
        {"id": "long", "instruction": "Tell me a long story.",
         "preferred": SHARED + " The end, happily.", "dispreferred": SHARED + " The end, sadly."}
    )  # fmt: skip
    return out


SPEC = {
    "model": "Qwen3-0.6B",
    "dataset": {
        "path": "prefs.jsonl",
        "prompt_column": "instruction",
        "chosen_column": "preferred",
        "rejected_column": "dispreferred",
        "holdout_share": 0.1,
    },
    "algorithm": {
        "kind": "dpo",
        "steps": 20,
        "batch_size": 4,
        "max_prompt_length": 64,
        "max_completion_length": 64,
    },
}


@pytest.fixture(scope="module")
def project(tmp_path_factory, empty_hf_home):
    root = tmp_path_factory.mktemp("prefs")
    (root / "prefs.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows()), encoding="utf-8"
    )
    (root / "dpo.json").write_text(json.dumps(SPEC))
    with offline_in(root, tmp_path_factory, empty_hf_home) as home:
        yield root, home


@pytest.fixture(scope="module")
def report(project):
    return check_dataset("dpo.json", samples=100)


def flagged(report, words: str) -> str:
    hits = [p for p in report.problems if words in p]
    assert len(hits) == 1, (words, report.problems)
    return hits[0]


def test_data_check_flags_each_pair_that_would_teach_nothing_or_both_ways(report):
    assert flagged(report, "identical chosen and rejected").startswith("2 of 18 pairs")
    assert flagged(report, "differ only in whitespace").startswith("1 of 18 pairs")
    assert flagged(report, "empty chosen or rejected").startswith("1 of 18 pairs")
    assert "row 'p8'" in flagged(report, "empty chosen or rejected")
    past = flagged(report, "differ only past the truncation length (128 tokens")
    assert past.startswith("1 of 18 pairs") and "row 'long'" in past
    assert flagged(report, "contradicting preferences").startswith("1 prompt appears")
    assert "row 'long'" in flagged(report, "near-identical")  # 97% alike: flagged as such too
    assert not [p for p in report.problems if "length bias" in p]  # lengths alternate here
    assert len(report.problems) == 6


def test_the_trainers_batches_decode_to_exactly_the_pairs_data_check_shows(project, report):
    """The oracle: the trainer's own collated batches, split by its completion mask, against
    `data check`; and what `data check` shows against the model's template applied by hand to
    the user's raw rows."""
    from posttrain.gpu import tokenizers
    from posttrain.gpu.dpo_trainer import dpo_trainer
    from posttrain.gpu.reporter import Reporter
    from posttrain.gpu.standin import stand_in_path
    from posttrain.gpu.trainers import Device, Job

    root, _ = project
    spec = load_spec("dpo.json")
    train = prepare(spec.dataset, "pairs").train
    tokenizer = tokenizers.load_tokenizer(spec.model.name).tokenizer
    reporter = Reporter(root / "run")
    job = Job(
        spec, str(stand_in_path(spec.model.name)), tokenizer, train, root / "run", reporter,
        Device.detect(), None,
    )  # fmt: skip
    try:
        trainer = dpo_trainer(job)
        seen = []
        for batch in trainer.get_train_dataloader():
            ids, mask, answer = (
                batch["input_ids"],
                batch["attention_mask"],
                batch["completion_mask"],
            )
            half = len(ids) // 2
            for i in range(half):
                parts = []
                for row in (i, half + i):
                    kept = [
                        t for t, m in zip(ids[row].tolist(), mask[row].tolist(), strict=True) if m
                    ]
                    n = len(kept) - int(answer[row].sum())
                    parts.append((kept[:n], kept[n:]))
                (prompt, chosen), (prompt_again, rejected) = parts
                assert prompt == prompt_again
                seen.append(tuple(tokenizer.decode(x) for x in (prompt, chosen, rejected)))
    finally:
        reporter.close()
    shown = {p["id"]: p for p in report.pairs}
    assert report.sample_ids == [r["id"] for r in train]  # every training pair is shown
    limit = spec.algorithm.max_prompt_length + spec.algorithm.max_completion_length
    expected = []
    for p in shown.values():  # the collator cuts prompt + answer at max_length, keep_start
        room = limit - p["prompt_tokens"]
        cut = [tokenizer.decode(tokenizer(p[k], add_special_tokens=False)["input_ids"][:room])
               for k in ("chosen", "rejected")]  # fmt: skip
        expected.append((p["prompt"], *cut))
    assert sorted(seen) == sorted(expected)

    raw = {r["id"]: r for r in read_rows(root / "prefs.jsonl")}
    kwargs = spec.model.template_kwargs()
    for row_id, pair in shown.items():
        row = raw[row_id]
        prompt = row["instruction"]
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        for side, column in (("chosen", "preferred"), ("rejected", "dispreferred")):
            whole = [*messages, {"role": "assistant", "content": row[column]}]
            own = tokenizer.apply_chat_template(whole, tokenize=False, **kwargs)
            assert pair["prompt"] + pair[side] == own
        assert pair["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert "Réponds brièvement" in pair["prompt"] or not isinstance(prompt, list)


def test_the_dry_run_of_a_qwen3_dpo_spec_succeeds_and_reports_what_dpo_needs(project):
    from posttrain.tools.launch import smoke_run
    from posttrain.tools.runs import get_run, sample_traces

    result = smoke_run("dpo.json")
    detail = wait_finished(result.run_id, 400)
    assert detail.status == "succeeded", detail.cause
    dry = get_run(result.run_id).dry_run
    assert dry["complete"]
    assert any("DPO (LoRA" in line and "adapter off" in line for line in dry["proved"])
    assert any("preference accuracy" in line for line in dry["cannot_prove"])
    metrics = get_run(result.run_id, verbose=True).metrics
    steps = [m for m in metrics if m.get("phase") == "train"]
    assert steps and all(
        {"margin", "preference_accuracy", "logp_chosen", "logp_rejected"} <= set(m) for m in steps
    )
    page = sample_traces(result.run_id, steps="1", n=2)
    trace = next(iter(page.steps.values()))[0]
    assert "⟦chosen⟧" in trace.trained and "⟦rejected⟧" in trace.trained
    assert trace.trained.startswith(trace.rendered)
