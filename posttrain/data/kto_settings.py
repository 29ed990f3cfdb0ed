"""KTO's own settings, the spec's `algorithm.kto` section (TRL's KTOConfig defaults; a test
holds them equal to the installed TRL's), filled in for kind kto (posttrain.algorithms.kto).

Here, in data/, because the flags of a feedback file read its weights (posttrain.data.kto_rows)
and data/ sits below the algorithms. The lengths are the algorithm's max_prompt_length +
max_completion_length.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

KTO_LOSSES = ("kto", "apo_zero_unpaired")


class KtoSpec(BaseModel):
    """KTO's beta, loss and the weights that rebalance one side of the feedback against the
    other (`data check` says which to set when the data is imbalanced)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    beta: Annotated[float, Field(gt=0, le=10)] = Field(
        0.1, description="How far from the reference (the base, adapter off) the policy may go."
    )
    desirable_weight: Annotated[float, Field(gt=0, le=1000)] = Field(
        1.0,
        description="The weight of a desirable (👍) answer's loss; raise it when they are "
        "the fewer (TRL: desirable_weight x desirable / (undesirable_weight x undesirable) "
        "within [1, 4/3]).",
    )
    undesirable_weight: Annotated[float, Field(gt=0, le=1000)] = Field(
        1.0,
        description="The weight of an undesirable (👎) answer's loss; raise it when they "
        "are the fewer.",
    )
    loss_type: Literal[KTO_LOSSES] = Field(  # type: ignore[valid-type]
        "kto",
        description="kto: the paper's loss, against a KL reference point estimated from "
        "mismatched answers in the batch (a batch of 2 or more a GPU); apo_zero_unpaired: "
        "no KL term, for answers known to beat the model's own.",
    )

    @property
    def estimates_kl(self) -> bool:
        """Whether the loss needs TRL's KL estimate (mismatched answers within a batch)."""
        return self.loss_type != "apo_zero_unpaired"
