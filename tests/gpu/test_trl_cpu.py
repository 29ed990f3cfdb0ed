"""TRL's fused LM head on the CPU scores only the completion's positions, with the same numbers."""

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def fused_logprobs(model, input_ids, labels):
    """Per-token log-probabilities, entropies and the weight gradient of the head, by TRL's
    fused LM head (as GRPO calls it), and how many rows its kernel projected."""
    import trl.trainer.utils as trl_utils

    kernel = trl_utils._ChunkedLogProbFunction
    rows = []

    class Counted:
        @staticmethod
        def apply(hidden, *args):
            rows.append(hidden.shape[0])
            return kernel.apply(hidden, *args)

    model.zero_grad()
    trl_utils._ChunkedLogProbFunction = Counted
    try:
        out = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
    finally:
        trl_utils._ChunkedLogProbFunction = kernel
    out.loss.backward()
    grad = model.get_output_embeddings().weight.grad.clone()
    return out.log_probs.detach(), out.entropy.detach(), grad, sum(rows)


def test_grpo_scores_only_the_completion_on_the_cpu_and_gets_the_same_numbers(monkeypatch):
    import torch
    import trl.trainer.utils as trl_utils
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl.kernels.chunked_logprob import _use_triton
    from trl.trainer.utils import add_fused_lm_head

    from posttrain.gpu.trl_cpu import score_only_labelled_positions
    from posttrain.models.standin_shape import STAND_IN_ARCH

    torch.manual_seed(0)
    # The dry run's stand-in, with a smaller vocabulary.
    config = Qwen3Config(vocab_size=5000, **STAND_IN_ARCH)
    model = Qwen3ForCausalLM(config)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    batch, prompt, completion = 3, 90, 10
    input_ids = torch.randint(0, config.vocab_size, (batch, prompt + completion))
    labels = input_ids.clone()
    labels[:, :-completion] = -100  # as GRPO labels them: only the completion is scored
    labels[2, -3:] = -100  # and a padded completion

    with monkeypatch.context() as m:
        m.setattr(trl_utils, "_use_triton", _use_triton)  # TRL as shipped
        shipped = fused_logprobs(model, input_ids, labels)
    assert score_only_labelled_positions()
    assert trl_utils._use_triton is not _use_triton
    ours = fused_logprobs(model, input_ids, labels)

    scored = int((labels[:, 1:] != -100).sum())
    assert shipped[3] == batch * (prompt + completion - 1)  # every position, prompt included
    assert ours[3] == scored == batch * completion - 3
    torch.testing.assert_close(ours[0], shipped[0])  # log-probabilities, position by position
    torch.testing.assert_close(ours[1], shipped[1])  # entropies
    torch.testing.assert_close(ours[2], shipped[2])  # and the gradient they give the head
    assert ours[0][:, : prompt - 1].abs().sum() == 0  # prompt positions read 0, as before
    assert ours[0][:2, -completion:].ne(0).all()
