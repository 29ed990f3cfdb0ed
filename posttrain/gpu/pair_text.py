"""The exact tokens DPO trains on: one rendering of a preference pair, shown by `data check`
and handed to the trainer.

A pair is rendered as TRL's DPOTrainer renders it (trl.trainer.dpo_trainer, tokenize_fn): the
prompt alone through the chat template with the generation prompt, then prompt + chosen and
prompt + rejected; the prompt's tokens are the common prefix of the three, each answer the rest.
The Qwen3 template, for one, opens the final assistant turn with an empty thinking block that
the generation prompt alone does not carry: it lands in both answers, as the model generates it.

The trainer receives these token ids, never nested values: a table built by `Dataset.from_list`
would unify the rows' tool schemas and call arguments, padding each with the others' keys set
to null (as for SFT, posttrain.gpu.sft_text). The collator truncates prompt + answer to
`max_length` from the end (TRL's keep_start): a pair whose answers differ only past it teaches
nothing, and `data check` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from posttrain.gpu.sft_text import common_prefix


@dataclass(frozen=True)
class PairIds:
    """One preference row as the trainer reads it."""

    prompt_ids: list[int]
    chosen_ids: list[int]
    rejected_ids: list[int]

    def as_example(self) -> dict[str, list[int]]:
        return {
            "prompt_ids": self.prompt_ids,
            "chosen_ids": self.chosen_ids,
            "rejected_ids": self.rejected_ids,
        }

    def cut_off(self, max_length: int) -> bool:
        """Whether the two answers differ, but only past max_length tokens (prompt included):
        truncated as the collator truncates, they read the same."""
        room = max(0, max_length - len(self.prompt_ids))
        return (
            self.chosen_ids != self.rejected_ids
            and self.chosen_ids[:room] == self.rejected_ids[:room]
        )


class PairText(BaseModel):
    """A pair decoded back to text, special tokens kept: what the model reads, byte for byte."""

    prompt: str
    chosen: str
    rejected: str
    prompt_tokens: int
    chosen_tokens: int
    rejected_tokens: int


class PairRenderer:
    """Renders preference rows (`prompt`, `chosen`, `rejected` as messages, `tools` where the
    row has them) with the model's chat template and its template settings."""

    def __init__(self, tokenizer: Any, template_kwargs: dict[str, Any]) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = template_kwargs

    def _ids(self, messages: list[dict[str, Any]], tools: Any, generation: bool) -> list[int]:
        out = self.tokenizer.apply_chat_template(
            messages,
            tokenize=True,
            return_dict=True,
            add_generation_prompt=generation,
            tools=tools,
            **self.template_kwargs,
        )
        return list(out["input_ids"])

    def encode(self, row: dict[str, Any]) -> PairIds:
        tools = row.get("tools")
        prompt = self._ids(row["prompt"], tools, True)
        chosen = self._ids(row["prompt"] + row["chosen"], tools, False)
        rejected = self._ids(row["prompt"] + row["rejected"], tools, False)
        n = min(common_prefix(prompt, chosen), common_prefix(prompt, rejected))
        return PairIds(prompt[:n], chosen[n:], rejected[n:])

    def decode(self, ids: PairIds) -> PairText:
        return decode_pair(self.tokenizer, ids.as_example())


def decode_pair(tokenizer: Any, example: dict[str, list[int]]) -> PairText:
    """A trainer's own example (its three id lists) decoded: what traces show and what tests
    compare with `data check`."""

    def text(ids: list[int]) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=False)

    p, c, r = example["prompt_ids"], example["chosen_ids"], example["rejected_ids"]
    return PairText(
        prompt=text(p),
        chosen=text(c),
        rejected=text(r),
        prompt_tokens=len(p),
        chosen_tokens=len(c),
        rejected_tokens=len(r),
    )
