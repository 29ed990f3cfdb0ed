"""RunSpec: everything a training run needs, validated strictly, hashed to a stable id.

A spec is data: it is written as YAML or JSON (or passed as a dict by an agent), crosses
process and machine boundaries as JSON, and every error names the field and the fix.

    model:     {name: tiny-local}            # or Qwen3-0.6B, or a local path
    dataset:   {builtin: rhyme-gym, n_rows: 2000}
    reward:    {name: rhyme_relevance}
    algorithm: {kind: grpo, steps: 300, learning_rate: 5e-4, lora: null}
    compute:   {backend: local}
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from posttrain.algorithms.dpo import DpoSpec
from posttrain.algorithms.kinds import ALGORITHMS, DEFAULT, algorithm_of, unknown_kind
from posttrain.algorithms.kto import KtoSpec
from posttrain.core.errors import ConfigError
from posttrain.core.paths import (
    HF_REPO_ID,
    RUN_ID,
    confine_in_validation,
    confine_local_in_validation,
    exists,
    is_file,
)
from posttrain.environments.refs import check_target, split_class_ref, split_tools_ref
from posttrain.models.catalog import (
    PRESETS,
    family_of,
    get_preset,
    parse_gpu,
    teacher_mismatch,
)
from posttrain.models.standin_shape import stand_in_for
from posttrain.spec import bounds as spec_bounds
from posttrain.spec.batch import per_device
from posttrain.spec.bounds import check_template_kwargs, template_columns
from posttrain.spec.keys import dry_run_key, gpu_of, shape_key

MAX_TIMEOUT_S = 24 * 3600
MAX_GYM_ROWS = 100_000
MAX_SEED = spec_bounds.MAX_SEED
MAX_NAME = 200  # characters of a spec's name
DEFAULT_REFERENCE = "reference"  # the column a reference answer is read from, by default
DEFAULT_REWARD = "rhyme_relevance"  # GRPO's reward when the spec names none (plan says so)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(Strict):
    """Which model to train."""

    name: str = Field(
        "tiny-local",
        max_length=1024,
        description="A preset name, a local path, or an HF repo id.",
    )
    chat_template_kwargs: dict[str, Any] | None = Field(
        None,
        description="Passed to the chat template, e.g. {enable_thinking: true} to let Qwen3 "
        "write a <think> block before its answer; None: the preset's (Qwen3: "
        "{enable_thinking: false}, the generation prompt ends with an empty think block).",
    )
    random_weights: bool = Field(
        False, description="Build the preset's shape with random weights (benchmarks only)."
    )
    stand_in: bool = Field(
        False,
        description="Train a tiny random-weight model of the same family with the real "
        "tokenizer and chat template: the local dry run (proves the plumbing, never quality). "
        "smoke_run sets it for a local dry run.",
    )

    @field_validator("chat_template_kwargs")
    @classmethod
    def _kwargs(cls, kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
        return check_template_kwargs(kwargs)

    @field_validator("name")
    @classmethod
    def _known(cls, name: str, info: ValidationInfo) -> str:
        if get_preset(name):
            return get_preset(name).name  # type: ignore[union-attr]
        looks_like_path = name.startswith((".", "/", "~"))
        confine_local_in_validation(info, name, "model path", looks_like_path)
        if exists(name):
            return name
        if looks_like_path:
            raise ValueError(
                f"model path '{name}' does not exist; give an existing folder with config.json, "
                f"or a preset: {sorted(PRESETS)}"
            )
        if HF_REPO_ID.match(name):
            return name  # a hub repo: usable where the hub is reachable (Modal)
        close = difflib.get_close_matches(name, list(PRESETS), n=1, cutoff=0.5)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(
            f"unknown model preset '{name}'{hint}; presets: {sorted(PRESETS)}, or a local path, "
            f"or an HF repo id such as 'Qwen/Qwen3-0.6B'"
        )

    @model_validator(mode="after")
    def _stand_in(self) -> ModelSpec:
        if self.stand_in and self.random_weights:
            raise ValueError(
                "model.stand_in (a tiny model of the family) and model.random_weights (the "
                "real shape, for benchmarks) exclude each other; set one"
            )
        if self.stand_in:
            stand_in_for(self.name)  # a clear error for a model of another family
        return self

    @property
    def preset(self):
        return get_preset(self.name)

    @property
    def family(self):
        return family_of(self.name)

    def template_kwargs(self) -> dict[str, Any]:
        """What the chat template is called with: the spec's, else the family's (Qwen3: no
        thinking block, i.e. the empty one)."""
        if self.chat_template_kwargs is not None:
            return dict(self.chat_template_kwargs)
        return dict(self.family.chat_template_kwargs) if self.family else {}


class RowFilter(Strict):
    """Keep a row only if its column passes every condition given."""

    column: str
    empty: bool | None = Field(None, description="True: keep empty values only; False: non-empty.")
    min_chars: Annotated[int, Field(ge=0)] | None = None
    max_chars: Annotated[int, Field(ge=1)] | None = None
    equals: str | None = None

    def keep(self, row: dict[str, Any]) -> bool:
        value = row.get(self.column)
        text = "" if value is None else str(value)
        if self.empty is not None and (not text.strip()) != self.empty:
            return False
        if self.min_chars is not None and len(text) < self.min_chars:
            return False
        if self.max_chars is not None and len(text) > self.max_chars:
            return False
        return self.equals is None or text == self.equals


class DatasetSpec(Strict):
    """Where the rows come from and how a row becomes a prompt."""

    builtin: Literal["rhyme-gym"] | None = Field(None, description="A dataset generated here.")
    path: str | None = Field(
        None, max_length=1024, description="A local .jsonl/.json/.parquet/.csv file."
    )
    hf_repo: str | None = Field(
        None, max_length=1024, description="A Hugging Face dataset repo id."
    )
    hf_split: str = Field("train", max_length=256)
    prompt_column: str = Field(
        "prompt", max_length=256, description="The prompt, when no template is given."
    )
    reference_column: str | None = Field(
        DEFAULT_REFERENCE,
        description="The reference answer a reward compares with, and evaluate's "
        "reference_nll. The default 'reference' is read where the rows have it and required "
        "only where the path needs it (a reward that reads it, an SFT target); another name "
        "is required. None: none.",
    )
    response_column: str | None = Field(None, description="SFT target; None: the reference column.")
    chosen_column: str | None = Field(
        None,
        max_length=256,
        description="DPO: the preferred answer (text or messages); None: 'chosen'.",
    )
    rejected_column: str | None = Field(
        None, max_length=256, description="DPO: the answer not preferred; None: 'rejected'."
    )
    label_column: str | None = Field(
        None,
        max_length=256,
        description="KTO: whether each answer is good or bad (true/false, 1/0, up/down, "
        "good/bad, yes/no or a thumbs emoji); None: 'label'.",
    )
    messages_column: str | None = Field(
        None, description="Rows already in chat form (SFT); tools stay with them."
    )
    tools_column: str | None = Field(None, description="Tool schemas passed to the template.")
    system_prompt: str | None = None
    prompt_template: str | None = Field(
        None, description="Python format string over the row's columns; None: '{prompt_column}'."
    )
    filters: list[RowFilter] = Field(default_factory=list, max_length=64)
    n_rows: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    holdout_share: Annotated[float, Field(ge=0.0, le=0.5)] = 0.1
    holdout_seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> DatasetSpec:
        given = [k for k in ("builtin", "path", "hf_repo") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of dataset.builtin, dataset.path, dataset.hf_repo "
                f"(given: {given or 'none'})"
            )
        if self.builtin and (self.n_rows or 0) > MAX_GYM_ROWS:
            raise ValueError(
                f"the rhyme gym generates at most {MAX_GYM_ROWS:,} rows (n_rows {self.n_rows:,})"
            )
        if self.path:
            confine_in_validation(info, self.path, "dataset.path")
        if self.hf_repo:  # datasets also loads a local folder given as a repo
            confine_local_in_validation(info, self.hf_repo, "dataset.hf_repo", False)
        if self.path and not is_file(self.path):
            raise ValueError(f"dataset.path '{self.path}' does not exist; give an existing file")
        if not template_columns(self.template) and not self.messages_column:
            raise ValueError(
                "prompt_template uses no column; write e.g. '{prompt}' or '{instruction}'"
            )
        return self

    @property
    def template(self) -> str:
        return self.prompt_template or "{" + self.prompt_column + "}"

    def columns_used(self) -> list[str]:
        """Every column the rows must have: the template's, the reference the spec names,
        the target. The default reference column ('reference') is read where the rows have
        it and required only where the path needs it: an SFT target (check_columns), a
        reward that reads the reference (posttrain.launching.columns.check_data). Chat rows' last
        answer is their reference; an environment's rows need none. (Decided by the value,
        not by whether it was written: a spec dumped and loaded again means the same.)"""
        used = [] if self.messages_column else template_columns(self.template)
        named = self.reference_column != DEFAULT_REFERENCE
        for column in (
            self.reference_column if named else None,
            self.response_column,
            self.messages_column,
            self.tools_column,
        ):
            if column:
                used.append(column)
        return list(dict.fromkeys(used))

    @property
    def target_column(self) -> str | None:
        return self.response_column or self.reference_column

    @property
    def pair_columns(self) -> tuple[str, str]:
        """DPO: the columns of the preferred and the other answer."""
        return self.chosen_column or "chosen", self.rejected_column or "rejected"

    @property
    def label(self) -> str:
        """KTO: the column of each answer's label, good or bad."""
        return self.label_column or "label"


class RewardSpec(Strict):
    name: str = Field(
        DEFAULT_REWARD,
        max_length=1024,
        description="A registry name or path/to/file.py:function.",
    )
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _rubric_inlined(cls, data: Any, info: ValidationInfo) -> Any:
        """A judge's rubric_file is read into params.rubric here, inside the roots: the spec
        then carries its rubric to the trainer, and a changed rubric is another spec."""
        if isinstance(data, dict) and data.get("name") == "judge":
            from posttrain.rewards.judge.reward import inline_rubric

            params = data.get("params")
            if isinstance(params, dict) and "rubric_file" in params:
                roots = (info.context or {}).get("roots")
                data = {**data, "params": inline_rubric(params, roots)}
        return data

    @model_validator(mode="after")
    def _buildable(self, info: ValidationInfo) -> RewardSpec:
        from posttrain.rewards.registry import confine_reward, get_reward

        if (info.context or {}).get("roots") is not None:
            confine_reward(self.name, info.context["roots"])  # before the file is imported
        get_reward(self.name, self.params)  # ConfigError names the parameter and the fix
        return self


class EnvironmentSpec(Strict):
    """Multi-turn episodes in which the model calls tools (TRL's environment contract): a
    class whose public methods are the tools, reset(**row) starts an episode, and an
    optional get_reward() scores it; or plain tool functions. The environment's reward and
    the spec's `reward` are summed as components (weight 1 each)."""

    name: str | None = Field(
        None,
        max_length=1024,
        description="A built-in environment (calculator) or path/to/file.py:ClassName.",
    )
    tools: str | None = Field(
        None,
        max_length=1024,
        description="Plain tool functions instead of a class: path/to/file.py:[fn_a, fn_b].",
    )
    max_turns: Annotated[int, Field(ge=1, le=64)] = Field(
        8, description="Tool-calling turns per episode; then the episode ends."
    )
    tool_timeout_s: Annotated[float, Field(gt=0, le=600)] = Field(
        10.0, description="Seconds one call into the environment may take before it is stopped."
    )
    max_result_chars: Annotated[int, Field(ge=16, le=1_000_000)] = Field(
        4000, description="Characters of a tool result the model sees; the rest is cut."
    )
    demo_column: str | None = Field(
        None,
        max_length=256,
        description="A column holding the tool calls of a successful episode for its row "
        "(either call shape); check_environment plays it to show the reward pays success.",
    )

    @model_validator(mode="after")
    def _names_one(self, info: ValidationInfo) -> EnvironmentSpec:
        if (self.name is None) == (self.tools is None):
            raise ValueError(
                "give exactly one of environment.name (a built-in such as 'calculator', or "
                "'path/to/file.py:ClassName') and environment.tools ('file.py:[fn, ...]')"
            )
        roots = (info.context or {}).get("roots")
        if self.name is not None:
            check_target(split_class_ref(self.name)[0], "environment.name", roots)
        else:
            check_target(split_tools_ref(self.tools or "")[0], "environment.tools", roots)
        return self


class LoraSpec(Strict):
    r: Annotated[int, Field(ge=1, le=1024)] = 16
    alpha: Annotated[int, Field(ge=1, le=4096)] = 32
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.05
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class TraceSpec(Strict):
    """Which steps keep sampled completions as traces, and how many each."""

    every: Annotated[int, Field(ge=0, le=100_000)] = 10  # 0: first and last step only
    steps: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)  # also these
    samples: Annotated[int, Field(ge=0, le=256)] = 8  # 0: keep no traces


class WarmStartSpec(Strict):
    """An SFT pass before GRPO, on the same dataset's targets (full rows, not the holdout)."""

    steps: Annotated[int, Field(ge=1, le=100_000)] = 250
    learning_rate: Annotated[float, Field(gt=0, le=1)] = 2e-3
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 32


def _either(names: list[str]) -> str:
    return " or ".join(f"'{n}'" for n in names)


def kind_fields() -> tuple[str, ...]:
    """The algorithm fields only some kinds read (their sections, a teacher): left out of a
    spec's id while unset, so the ids of specs written before a kind existed stay as they
    were."""
    return tuple(
        name
        for a in ALGORITHMS.values()
        for name in (*a.own_fields, *([a.section[0]] if a.section else []))
    )


class AlgorithmSpec(Strict):
    kind: str = Field(
        DEFAULT.name,
        description="; ".join(f"{a.name}: {a.summary}" for a in ALGORITHMS.values()),
    )
    lora: LoraSpec | None = Field(
        default_factory=LoraSpec, description="LoRA adapter; null: full fine-tune."
    )
    learning_rate: Annotated[float, Field(ge=0, le=1)] = Field(
        1e-5,
        description="0: a control arm that trains nothing (an experiment's baseline for "
        "training noise); the run still samples, scores and saves as any other.",
    )
    lr_scheduler: Literal["constant", "cosine", "linear"] = "constant"
    warmup_steps: Annotated[int, Field(ge=0, le=1_000_000)] | None = Field(
        None,
        description="Steps over which the learning rate rises from 0 to learning_rate, then "
        "follows lr_scheduler. Adam's first step moves every weight by about the learning rate "
        "whatever its gradient: a full fine-tune at a high rate can leave its start in one step "
        "(docs/demo.md). Unset: none, as TRL.",
    )
    steps: Annotated[int, Field(ge=1, le=1_000_000)] = 100
    batch_size: Annotated[int, Field(ge=1, le=8192)] = Field(
        32, description="Completions per step (GRPO: prompts x generations); rows per step (SFT)."
    )
    num_generations: Annotated[int, Field(ge=2, le=256)] = 8
    max_prompt_length: Annotated[int, Field(ge=8, le=131072)] = 512
    max_completion_length: Annotated[int, Field(ge=1, le=131072)] = 256
    temperature: Annotated[float, Field(gt=0, le=5)] = 1.0
    beta: Annotated[float, Field(ge=0, le=10)] = 0.04
    save_every: Annotated[int, Field(ge=0, le=1_000_000)] = 50  # 0: at the end only
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    traces: TraceSpec = Field(default_factory=TraceSpec)
    warmstart: WarmStartSpec | None = None
    eval_every: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        0,
        description="Every K steps (and before step 1), the reward on eval_tasks held-out "
        "prompts, one sample each with a fixed seed: a curve in get_run. 0: off.",
    )
    eval_tasks: Annotated[int, Field(ge=1, le=1024)] = 16
    dpo: DpoSpec | None = Field(
        None, description="DPO's beta and loss (filled with TRL's defaults for kind dpo)."
    )
    kto: KtoSpec | None = Field(
        None,
        description="KTO's beta and the weights of good and bad answers (filled with TRL's "
        "defaults for kind kto).",
    )
    teacher: str | None = Field(
        None,
        max_length=1024,
        description="Distillation: the teacher model (a preset, hub id or local folder) of "
        "the student's tokenizer family.",
    )
    sft_loss: Literal["assistant_turns", "last_turn", "all_tokens"] = Field(
        "assistant_turns",
        description="SFT (and the warm-start): which tokens carry the loss. assistant_turns: "
        "every assistant turn, its tool calls and answers; last_turn: the last assistant turn "
        "only; all_tokens: every token, prompts and tool replies too. `data check` marks them.",
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in ALGORITHMS:
            raise ValueError(unknown_kind(kind))
        return kind

    @model_validator(mode="after")
    def _consistent(self) -> AlgorithmSpec:
        """The kind's own section filled with its defaults, another kind's section or fields
        refused, then the kind's own rules (posttrain.algorithms)."""
        mine = algorithm_of(self.kind)
        if self.warmup_steps and self.warmup_steps >= self.steps:
            raise ValueError(
                f"algorithm.warmup_steps ({self.warmup_steps}) must be below algorithm.steps "
                f"({self.steps}): the learning rate would never reach learning_rate"
            )
        if self.warmstart and not mine.takes_warmstart:
            raise ValueError(
                f"warmstart is an SFT pass before GRPO; a {mine.title} run does not take one"
            )
        for other in ALGORITHMS.values():
            if other is mine:
                continue
            owned = [*other.own_fields, *([other.section[0]] if other.section else [])]
            for name in owned:
                if name in mine.own_fields or name == (mine.section or ("",))[0]:
                    continue
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"algorithm.{name} works with kind '{other.name}' (this is '{self.kind}')"
                    )
        if mine.section is not None and getattr(self, mine.section[0]) is None:
            name, model = mine.section
            object.__setattr__(self, name, model())  # TRL's defaults, said by plan
        mine.check(self)
        return self


class ComputeSpec(Strict):
    backend: Literal["local", "modal"] = "local"
    gpu: str | None = Field(None, description="e.g. H100 or H100:4; None: the preset's default.")
    timeout_s: Annotated[int, Field(ge=60)] = 3600

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, gpu: str | None) -> str | None:
        if gpu is None:
            return None
        name, count = parse_gpu(gpu)
        return name if count == 1 else f"{name}:{count}"

    @field_validator("timeout_s")
    @classmethod
    def _timeout(cls, timeout_s: int) -> int:
        if timeout_s > MAX_TIMEOUT_S:
            raise ValueError(
                f"timeout_s {timeout_s} is over 24 h ({MAX_TIMEOUT_S} s), Modal's limit for one "
                f"call; split the work into shorter runs"
            )
        return timeout_s


# What evaluate already reports under these names: a metric of eval.metrics takes another
# (its `label`), so no two results share one.
REPORTED_METRICS = (
    "reward",
    "rhyme_rate",
    "length_words",
    "reference_nll",
    "eval_judge",
    "success",
    "turns",
    "tool_calls",
    "tool_errors",
    "preference_accuracy",
    "preference_margin",
    "feedback_loglik",
    "desirable_loglik",
    "undesirable_loglik",
)


class MetricSpec(RewardSpec):
    """A reward evaluate scores as a metric (eval.metrics): named as `reward:` is, by a
    registry name or path/to/file.py:function, with its params."""

    name: str = Field(
        max_length=1024,
        description="A registry name (e.g. tool_call) or path/to/file.py:function.",
    )
    label: str | None = Field(
        None,
        max_length=64,
        pattern=r"^[A-Za-z][\w.-]*$",
        description="The name it is reported under; None: the reward's name (a file's: its "
        "function's).",
    )

    @property
    def reported(self) -> str:
        return self.label or self.name.rpartition(":")[2]


# eval fields added after specs with an eval section were stored: unset, they stay out of the id
EVAL_FIELDS_ADDED = ("mde", "path", "metrics")


class EvalSpec(Strict):
    """How evaluate judges the trained model."""

    pass_threshold: Annotated[float, Field(allow_inf_nan=False)] | None = Field(
        None,
        description="The reward at which a sample passes, for pass@k and pass^k. None: a 0/1 "
        "reward passes at 1, a reward with a declared range at half of it; otherwise pass "
        "rates are not reported.",
    )
    judge: dict[str, Any] | None = Field(
        None,
        description="A judge evaluate asks besides the training reward (an un-optimised "
        "metric, eval_judge): the params of a judge reward (rubric or rubric_file, base_url, "
        "model, api_key_env, ...), scoring each answer alone. Give it a rubric the training "
        "never saw.",
    )

    mde: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None,
        description="The smallest gain worth finding, in the headline metric's units: "
        "evaluate's tasks_needed is the held-out tasks for an 80% chance of calling a gain "
        "this large improved. None: 5% of the reward's declared range (0.05 on a 0-1 metric), "
        "else a fifth of the per-task deltas' sd.",
    )

    path: str | None = Field(
        None,
        max_length=1024,
        description="A held-out file of your own (JSONL, JSON, Parquet or CSV, the columns of "
        "the training data, read through the spec's dataset columns): evaluate measures on its "
        "rows instead of the run's own held-out share, after dropping those seen in training. "
        "None: the rows the run held out (dataset.holdout_share).",
    )
    metrics: list[MetricSpec] = Field(
        default_factory=list,
        max_length=16,
        description="Rewards evaluate scores every answer with, as metrics beside the headline "
        "(any kind, SFT, DPO and KTO included): a built-in name (tool_call) or "
        "path/to/file.py:function, with params as `reward:` takes them; reported un-optimised "
        "(a regression in one qualifies the verdict). A judge goes in eval.judge.",
    )

    @field_validator("path")
    @classmethod
    def _path_exists(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            return None
        confine_in_validation(info, path, "eval.path")
        if Path(path).suffix.lower() not in (".jsonl", ".json", ".parquet", ".csv"):
            raise ValueError(
                f"'{path}' is not a .jsonl, .json, .parquet or .csv file; give the held-out "
                f"rows in one of those formats"
            )
        if not is_file(path):
            raise ValueError(
                f"'{path}' does not exist; give an existing file of held-out rows (relative "
                f"to the working directory, or absolute)"
            )
        return path

    @field_validator("metrics", mode="before")
    @classmethod
    def _metrics_shorthand(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        items = [{"name": v} if isinstance(v, str) else v for v in value]
        for i, item in enumerate(items):
            if isinstance(item, dict) and item.get("name") == "judge":
                raise ValueError(
                    f"metrics[{i}] is a judge: give it as eval.judge (its calls are priced and "
                    f"approved before evaluate runs); eval.metrics takes rewards scored here"
                )
        return items

    @model_validator(mode="after")
    def _metrics_named_once(self) -> EvalSpec:
        seen: set[str] = set()
        for i, metric in enumerate(self.metrics):
            name = metric.reported
            if name in REPORTED_METRICS or name in seen:
                taken = (
                    "evaluate reports a metric of that name"
                    if name not in seen
                    else ("an earlier metric has it")
                )
                raise ValueError(
                    f"eval.metrics[{i}] would be reported as '{name}', and {taken}; give it a "
                    f"label of its own (metrics: [{{name: {metric.name}, label: my_{name}}}])"
                )
            seen.add(name)
        return self

    @field_validator("judge", mode="before")
    @classmethod
    def _judge_checked(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        from posttrain.rewards.judge.metric import metric_params

        try:
            return metric_params(value, (info.context or {}).get("roots"))
        except ConfigError as exc:  # said at its field, eval.judge
            raise ValueError(str(exc).removeprefix("eval.judge: ")) from None


class RunSpec(Strict):
    """One training run."""

    name: str | None = Field(
        None, max_length=MAX_NAME, description="A label for people; not part of the spec id."
    )
    model: ModelSpec = Field(default_factory=ModelSpec)
    dataset: DatasetSpec = Field(default_factory=lambda: DatasetSpec(builtin="rhyme-gym"))
    reward: RewardSpec | None = Field(
        None,
        description="What GRPO maximises and evaluate scores. GRPO without one (and without "
        f"an environment, whose get_reward scores its episodes) gets '{DEFAULT_REWARD}' "
        "(plan lists it as filled in); SFT trains without one, and "
        "evaluate then compares the held-out answers' likelihood (reference_nll).",
    )
    algorithm: AlgorithmSpec = Field(default_factory=AlgorithmSpec)
    compute: ComputeSpec = Field(default_factory=ComputeSpec)
    environment: EnvironmentSpec | None = Field(
        None,
        description="Tools the model calls over several turns (GRPO); check it first with "
        "check_environment. None: single-turn answers.",
    )
    eval: EvalSpec | None = Field(
        None, description="How evaluate judges it (pass threshold, a judge as a second opinion)."
    )
    budget_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    resume_from: str | None = Field(
        None, description="A run id: continue from its last checkpoint at the next step."
    )

    @field_validator("resume_from")
    @classmethod
    def _run_id(cls, run_id: str | None) -> str | None:
        if run_id is not None and not RUN_ID.match(run_id):
            raise ValueError(f"resume_from '{run_id}' is not a run id (e.g. run-261130-1200-ab12)")
        return run_id

    @model_validator(mode="after")
    def _grpo_has_a_reward(self) -> RunSpec:
        if self.reward is None and algorithm_of(self).rewarded and self.environment is None:
            # filled after validation, so it stays out of model_fields_set and plan lists it;
            # an environment scores its own episodes (get_reward), a named reward beside it
            object.__setattr__(self, "reward", RewardSpec())
        return self

    @model_validator(mode="after")
    def _tools_need_sft(self) -> RunSpec:
        mine = algorithm_of(self)
        if self.dataset.tools_column and not mine.takes_tools_column:
            takes = [a.name for a in ALGORITHMS.values() if a.takes_tools_column]
            raise ValueError(
                f"dataset.tools_column works with algorithm.kind {_either(takes)} (each row's "
                f"tool schemas go into its prompt); {mine.title} with per-row tools is not "
                f"built (TRL renders one tool list for every prompt), so the schemas would be "
                f"dropped silently. Use kind {_either(takes)}, or put the tools into "
                f"system_prompt"
            )
        return self

    @model_validator(mode="after")
    def _teacher_reads_like_the_student(self) -> RunSpec:
        teacher = self.algorithm.teacher
        problem = teacher_mismatch(self.model.name, teacher) if teacher else None
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _environment_needs_grpo(self) -> RunSpec:
        if self.environment is not None and not algorithm_of(self).takes_environment:
            takes = [a.name for a in ALGORITHMS.values() if a.takes_environment]
            raise ValueError(
                f"environment works with algorithm.kind {_either(takes)} (episodes are sampled "
                f"and scored); for SFT on tool-calling chats use dataset.messages_column"
            )
        return self

    @model_validator(mode="after")
    def _episodes_have_their_reward(self) -> RunSpec:
        if self.environment is not None and self.eval is not None and self.eval.metrics:
            raise ValueError(
                "eval.metrics scores single answers, and this spec's held-out tasks are whole "
                "episodes in its environment (their get_reward scores them): drop eval.metrics, "
                "or score the episodes in the environment's get_reward"
            )
        return self

    @model_validator(mode="after")
    def _batch_divides_among_gpus(self) -> RunSpec:
        a, devices = self.algorithm, self.gpu_count
        mine = algorithm_of(a)
        each = per_device(a.batch_size, devices, "algorithm.batch_size", mine.groups(a))
        least, why = mine.per_gpu_floor(a)
        if each < least:
            raise ValueError(
                f"algorithm.batch_size {a.batch_size} gives each of {devices} GPU(s) {each} "
                f"row(s) a step: {why}"
            )
        if a.warmstart is not None:
            per_device(a.warmstart.batch_size, devices, "algorithm.warmstart.batch_size")
        return self

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            data = {**data, "model": {"name": data["model"]}}
        if isinstance(data, dict) and isinstance(data.get("reward"), str):
            data = {**data, "reward": {"name": data["reward"]}}
        if isinstance(data, dict) and isinstance(data.get("environment"), str):
            data = {**data, "environment": {"name": data["environment"]}}
        return data

    @property
    def spec_id(self) -> str:
        """A stable id: the hash of the canonical JSON of everything but the name."""
        # a field left unset (environment, eval) leaves the id of every spec written before
        # the field existed as it was
        exclude: dict[str, Any] = {"name": True}
        exclude |= {f: True for f in ("environment", "eval") if getattr(self, f) is None}
        for part, fields in (
            ("algorithm", (*kind_fields(), "warmup_steps")),
            ("dataset", ("chosen_column", "rejected_column", "label_column")),
            ("eval", EVAL_FIELDS_ADDED),
        ):
            section = getattr(self, part)
            if section is None:
                continue
            # unset: None, or an empty list (eval.metrics)
            unset = {f: True for f in fields if getattr(section, f, None) in (None, [])}
            if unset:
                exclude[part] = unset
        canonical = json.dumps(
            self.model_dump(mode="json", exclude=exclude), sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def gpu(self) -> str:
        """The GPU the run asks for (the preset's default when none is set)."""
        return gpu_of(self.model_dump(mode="json"))

    @property
    def gpu_count(self) -> int:
        """How many GPUs train the run together: compute.gpu's count on Modal; 1 here."""
        return 1 if self.compute.backend == "local" else parse_gpu(self.gpu)[1]

    @property
    def batch_per_gpu(self) -> int:
        """Each GPU's share of algorithm.batch_size, the batch of all of them together
        (posttrain.spec.batch)."""
        return per_device(self.algorithm.batch_size, self.gpu_count)

    @property
    def shape(self) -> dict[str, Any]:
        """What a step's time depends on: the key finished runs are matched by."""
        return shape_key(self.model_dump(mode="json"))

    @property
    def dry_run_key(self) -> str:
        """What a dry run proves for: the model, the data, the template, the reward and the
        algorithm's kind and adapter. Steps, sizes, compute and seeds are left out, because a
        dry run cuts them; a launch with the same key has had its plumbing proven."""
        return dry_run_key(self.model_dump(mode="json"))

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def load_spec(
    source: str | Path | dict[str, Any] | RunSpec, roots: list[Path] | None = None
) -> RunSpec:
    """A RunSpec from a dict, a RunSpec, a JSON string, or a .yaml/.yml/.json file.

    With `roots`, every local path the spec names must lie inside them (checked first)."""
    if isinstance(source, RunSpec):
        return source
    data = spec_bounds.read_source(source)
    if not isinstance(data, dict):
        raise ConfigError(f"a spec must be a mapping of fields, not {type(data).__name__}")
    spec_bounds.check_data(data)
    try:
        return RunSpec.model_validate(data, context={"roots": roots})
    except ValidationError as exc:
        from posttrain.spec.messages import explain

        raise ConfigError(explain(exc, RunSpec)) from None
    except ConfigError as exc:  # raised inside a validator (reward params)
        raise ConfigError(f"spec field 'reward': {exc}") from None
