"""The exact text SFT trains on and where its loss falls: one rendering, shown by
`check_dataset` and tokenized by the trainer.

Each row is rendered on its own, with its own tools and messages, by the chat template, and
tokenized here; the trainer receives token ids and labels, never nested values (a table of
rows built by `Dataset.from_list` would unify every row's tool schemas and call arguments,
padding them with the other rows' keys set to null).

Where the loss falls (`algorithm.sft_loss`):
  assistant_turns  every assistant turn, its tool calls, answer and end-of-turn token (the
                   default): a call -> tool reply -> answer row trains the call too;
  last_turn        the last assistant turn only;
  all_tokens       every token, system prompt, tool schemas and tool replies included.
Assistant turns are found by the `{% generation %}` markers of a training chat template: the
model's own when it has them, else TRL's training variant of it (for Qwen2.5 the same text;
for Qwen3 every assistant turn keeps its empty thinking block, as it is generated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from posttrain.core.errors import ConfigError

LossOn = Literal["assistant_turns", "last_turn", "all_tokens"]
IGNORE = -100  # the label of a token that carries no loss
OPEN, CLOSE = "⟦", "⟧"  # around the loss-bearing spans in marked text
MARKS = f"text between {OPEN} and {CLOSE} carries the loss; the marks are not in the data"


@dataclass(frozen=True)
class TrainingText:
    """One row as the trainer reads it."""

    input_ids: list[int]
    labels: list[int]  # IGNORE where no loss
    text: str  # input_ids decoded, special tokens kept: what the model reads, byte for byte
    spans: list[tuple[int, int]]  # character ranges of `text` that carry the loss

    @property
    def marked(self) -> str:
        """The text with each loss-bearing span between ⟦ and ⟧."""
        return mark(self.text, self.spans)

    @property
    def loss_tokens(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def mark(text: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in spans:
        out += [text[at:start], OPEN, text[start:end], CLOSE]
        at = end
    return "".join([*out, text[at:]])


def runs(mask: list[int]) -> list[tuple[int, int]]:
    """[start, end) token ranges where the mask is 1."""
    found, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            found.append((start, i))
            start = None
    return found


def training_template(tokenizer: Any, family_template: str | None) -> tuple[str, str]:
    """A chat template that marks assistant turns, and where it came from."""
    from trl import chat_template_utils as ctu

    own = tokenizer.chat_template
    try:
        patched = ctu.get_training_chat_template(tokenizer)
    except ValueError:  # a template TRL has no training variant of
        patched = None
    else:
        if patched is None:
            return own, "the model's own chat template (it marks assistant turns)"
        return patched, "TRL's training variant of the model's chat template"
    variant = getattr(ctu, f"{family_template}_training_chat_template", None)
    if family_template and variant:
        return variant, (
            f"TRL's training variant of the {family_template} template (the model's own "
            f"template is not one TRL knows)"
        )
    if own and ctu.has_generation_markers(own):
        return own, "the model's own chat template (it marks assistant turns)"
    raise ConfigError(
        "the model's chat template does not mark assistant turns ({% generation %}) and TRL "
        "has no training variant of it, so the loss cannot be put on assistant turns only; "
        "set algorithm.sft_loss: last_turn (loss after the prompt) or all_tokens, or give the "
        "model folder a template with {% generation %} markers"
    )


class SftRenderer:
    """Rows (prepared: `prompt` + `completion` messages, `tools`) -> TrainingText."""

    def __init__(
        self,
        tokenizer: Any,
        loss_on: LossOn,
        template_kwargs: dict[str, Any] | None = None,
        family_template: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.loss_on = loss_on
        self.kwargs = dict(template_kwargs or {})
        self.template: str | None = None
        self.template_source = "the model's own chat template"
        if loss_on != "all_tokens":
            try:
                self.template, self.template_source = training_template(tokenizer, family_template)
            except ConfigError:
                if loss_on == "assistant_turns":
                    raise
                # last_turn without markers: the loss starts where the prompt ends (TRL's
                # completion-only rule)

    @property
    def described(self) -> str:
        where = {
            "assistant_turns": "every assistant turn (calls, answers, end-of-turn tokens)",
            "last_turn": "the last assistant turn only",
            "all_tokens": "every token (system, tools, user, tool replies and answers)",
        }[self.loss_on]
        return f"loss on {where}; rendered by {self.template_source}"

    def _encode(self, messages: list[dict[str, Any]], tools: Any, **more: Any) -> dict[str, Any]:
        out = self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            chat_template=self.template,
            tokenize=True,
            return_dict=True,
            **self.kwargs,
            **more,
        )
        return dict(out)

    def __call__(self, row: dict[str, Any]) -> TrainingText:
        """The row as the trainer reads it, decoded, with its loss spans."""
        return decode_trained(self.tokenizer, *self.encode(row))

    def encode(self, row: dict[str, Any]) -> tuple[list[int], list[int]]:
        """The row's token ids and labels (IGNORE where no loss): what the trainer gets."""
        messages = [*row["prompt"], *row.get("completion", [])]
        tools = row.get("tools")
        try:
            if self.loss_on == "all_tokens":
                ids = list(self._encode(messages, tools)["input_ids"])
                mask = [1] * len(ids)
            elif self.template is not None:
                out = self._encode(messages, tools, return_assistant_tokens_mask=True)
                ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
                if self.loss_on == "last_turn" and runs(mask):
                    start, end = runs(mask)[-1]
                    mask = [int(start <= i < end) for i in range(len(ids))]
            else:  # last_turn, by the prompt's length
                ids = list(self._encode(messages, tools)["input_ids"])
                head = self._encode(row["prompt"], tools, add_generation_prompt=True)
                n = common_prefix(head["input_ids"], ids)
                mask = [0] * n + [1] * (len(ids) - n)
        except ConfigError:
            raise
        except Exception as exc:  # jinja and template errors come in many types
            raise ConfigError(
                f"row {row.get('id')!r} does not render through the chat template: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if not any(mask):
            raise ConfigError(
                f"row {row.get('id')!r}: no token carries the loss ({self.described}); "
                f"the row needs an assistant turn"
            )
        return ids, [t if bit else IGNORE for t, bit in zip(ids, mask, strict=True)]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def decode_trained(tokenizer: Any, input_ids: list[int], labels: list[int]) -> TrainingText:
    """A trainer's own example (its input ids and labels) decoded back to text and spans: what
    traces show and what tests compare with `check_dataset`."""
    mask = [int(label != IGNORE) for label in labels]
    decode = tokenizer.decode
    return TrainingText(
        list(input_ids),
        list(labels),
        decode(input_ids, skip_special_tokens=False),
        [
            (
                len(decode(input_ids[:a], skip_special_tokens=False)),
                len(decode(input_ids[:b], skip_special_tokens=False)),
            )
            for a, b in runs(mask)
        ],
    )
