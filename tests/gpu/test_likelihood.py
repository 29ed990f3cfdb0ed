"""Evaluate's answer likelihoods without [batch, sequence, vocabulary] logits: the same numbers
as scoring every position's logits upcast at once, while no vocabulary-wide tensor holds more
than the chunk's positions."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from posttrain.gpu import likelihood
from posttrain.gpu.likelihood import answer_nll_sums
from posttrain.models.standin_shape import QWEN_VOCAB_ROWS, STAND_IN_ARCH


@pytest.fixture(scope="module")
def model():
    """A Qwen3 with the real vocabulary's 151,936 rows (the dry run's stand-in shape)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(vocab_size=QWEN_VOCAB_ROWS, **STAND_IN_ARCH)).eval()


def rows(seed: int = 1) -> list:
    """Heads and answers of mixed lengths, a missing row and an empty head among them."""
    g = torch.Generator().manual_seed(seed)

    def ids(n: int) -> list[int]:
        return torch.randint(0, QWEN_VOCAB_ROWS, (n,), generator=g).tolist()

    shapes = [(40, 9), (3, 61), (17, 17), (0, 12), (55, 2), (8, 30), (21, 44), (1, 1)]
    made = [(ids(h), ids(a)) for h, a in shapes]
    return [*made[:3], None, *made[3:]]


def straightforward(model, pad: int, rows: list, batch: int = 8) -> list:
    """The computation evaluate ran before: every position's logits, upcast whole, and
    cross-entropy over all of them."""
    out = [None] * len(rows)
    todo = [i for i, r in enumerate(rows) if r is not None]
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        seqs = [rows[i][0] + rows[i][1] for i in chunk]
        width = max(map(len, seqs))
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
        labels = torch.full_like(ids, -100)
        for j, i in enumerate(chunk):
            head, answer = rows[i]
            labels[j, len(head) : len(head) + len(answer)] = ids[
                j, len(head) : len(head) + len(answer)
            ]
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        shifted, targets = logits[:, :-1], labels[:, 1:]
        nll = torch.nn.functional.cross_entropy(
            shifted.reshape(-1, shifted.size(-1)),
            targets.reshape(-1),
            ignore_index=-100,
            reduction="none",
        ).view(targets.shape)
        for j, i in enumerate(chunk):
            out[i] = float(nll[j].sum())
    return out


class WidestVocabularyTensor(TorchDispatchMode):
    """Records the most positions any tensor a vocabulary wide holds, by dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.positions: dict[torch.dtype, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.dim() >= 2 and t.shape[-1] == QWEN_VOCAB_ROWS:
                n = t.numel() // QWEN_VOCAB_ROWS
                self.positions[t.dtype] = max(self.positions.get(t.dtype, 0), n)
        return out


def test_chunked_answer_likelihoods_equal_scoring_every_position_at_once(model, monkeypatch):
    monkeypatch.setattr(likelihood, "LOGIT_POSITIONS", 96)  # several groups and chunks here
    monkeypatch.setattr(likelihood, "UPCAST_POSITIONS", 16)
    data = rows()
    expected = straightforward(model, 0, data)
    got = answer_nll_sums(model, 0, data)
    assert got[3] is None and expected[3] is None
    assert [r is None for r in got] == [r is None for r in expected]
    torch.testing.assert_close(
        torch.tensor([g for g in got if g is not None]),
        torch.tensor([e for e in expected if e is not None]),
        rtol=2e-6,
        atol=1e-4,
    )


def test_a_one_token_answer_after_a_one_token_head_is_scored_and_an_empty_head_skips_its_first(
    model,
):
    data = rows()
    expected = straightforward(model, 0, data, batch=1)
    got = answer_nll_sums(model, 0, data, batch=1)
    assert got[-1] == pytest.approx(expected[-1], rel=1e-5) and got[-1] > 0
    assert got[4] == pytest.approx(expected[4], rel=1e-5)  # the empty head: 11 of 12 scored


def test_a_lora_wrapped_model_scores_through_the_same_path(model):
    from peft import LoraConfig, get_peft_model

    wrapped = get_peft_model(
        type(model)(model.config),
        LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False),
    )
    wrapped.base_model.model.load_state_dict(model.state_dict(), strict=False)
    data = rows(2)
    torch.testing.assert_close(
        torch.tensor([g for g in answer_nll_sums(wrapped, 0, data) if g is not None]),
        torch.tensor([e for e in straightforward(wrapped, 0, data) if e is not None]),
        rtol=2e-6,
        atol=1e-4,
    )


def test_no_vocabulary_wide_tensor_holds_more_positions_than_its_chunk(model, monkeypatch):
    """In bf16, as on a GPU: the model's logits at most LOGIT_POSITIONS positions, their fp32
    upcast at most UPCAST_POSITIONS; the straightforward way upcast [batch, sequence] at once."""
    import copy

    monkeypatch.setattr(likelihood, "LOGIT_POSITIONS", 128)
    monkeypatch.setattr(likelihood, "UPCAST_POSITIONS", 32)
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    data = rows()
    before, after = WidestVocabularyTensor(), WidestVocabularyTensor()
    with before:
        straightforward(bf16, 0, data)
    with after:
        answer_nll_sums(bf16, 0, data)
    longest = max(len(h) + len(a) for h, a in filter(None, data))
    assert before.positions[torch.bfloat16] == 8 * longest
    assert before.positions[torch.float32] == 8 * longest
    assert after.positions[torch.bfloat16] <= 128
    assert after.positions[torch.float32] <= 32
