"""The exact tokens KTO trains on: one rendering of a feedback row, shown by `data check`, handed
to the trainer and scored by evaluate.

A row is rendered as TRL's KTOTrainer renders it (trl.trainer.kto_trainer, tokenize_fn): the
prompt alone through the chat template with the generation prompt, then prompt + answer; the
prompt's tokens are the common prefix of the two, the answer the rest (the Qwen3 template's
empty thinking block lands in the answer, as the model generates it). This is one side of a DPO
pair, so the rendering is posttrain.gpu.pair_text's.

The collator truncates prompt + answer to max_length from the end (keep_start); a row whose
prompt alone fills it is dropped by the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from posttrain.gpu.pair_text import PairRenderer
from posttrain.gpu.sft_text import common_prefix

# How a trace marks the answer that follows the prompt, with the rater's verdict
VERDICT = {True: "⟦desirable 👍⟧", False: "⟦undesirable 👎⟧"}


@dataclass(frozen=True)
class KtoIds:
    """One feedback row as the trainer reads it."""

    prompt_ids: list[int]
    completion_ids: list[int]
    label: bool

    def as_example(self) -> dict[str, Any]:
        return {
            "prompt_ids": self.prompt_ids,
            "completion_ids": self.completion_ids,
            "label": self.label,
        }

    def cut_off(self, max_length: int) -> bool:
        """Whether the collator cuts the answer (prompt + answer over max_length tokens)."""
        return len(self.prompt_ids) + len(self.completion_ids) > max_length


class KtoText(BaseModel):
    """A row decoded back to text, special tokens kept: what the model reads, byte for byte."""

    prompt: str
    completion: str
    label: bool
    prompt_tokens: int
    completion_tokens: int

    @property
    def shown(self) -> str:
        """The prompt, the verdict mark, then the answer: what a trace carries."""
        return f"{self.prompt}{VERDICT[self.label]}{self.completion}"


class KtoRenderer(PairRenderer):
    """Renders feedback rows (`prompt` and `completion` as messages, `label`, `tools` where the
    row has them) with the model's chat template and its template settings."""

    def encode_row(self, row: dict[str, Any]) -> KtoIds:
        """The row's token ids; its label must be read already (True or False)."""
        label = row.get("label")
        if not isinstance(label, bool):
            raise ValueError(f"row {row.get('id')!r} has no readable label ({label!r})")
        tools = row.get("tools")
        prompt = self._ids(row["prompt"], tools, True)
        whole = self._ids(row["prompt"] + row["completion"], tools, False)
        n = common_prefix(prompt, whole)
        return KtoIds(prompt[:n], whole[n:], label)

    def decode_row(self, ids: KtoIds) -> KtoText:
        return decode_kto(self.tokenizer, ids.as_example())


def decode_kto(tokenizer: Any, example: dict[str, Any]) -> KtoText:
    """A trainer's own example (its prompt and answer ids, its label) decoded: what traces show
    and what tests compare with `data check`."""

    def text(ids: list[int]) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=False)

    p, c = example["prompt_ids"], example["completion_ids"]
    return KtoText(
        prompt=text(p),
        completion=text(c),
        label=bool(example["label"]),
        prompt_tokens=len(p),
        completion_tokens=len(c),
    )
