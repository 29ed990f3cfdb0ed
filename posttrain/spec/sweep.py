"""An experiment in the spec: a `sweep:` block that turns one spec into arms.

    sweep:
      algorithm.learning_rate: [1.0e-3, 0.0]   # a dotted spec key -> the values to try
      lora.r: [8, 32]                          # short for algorithm.lora.r
      seeds: [0, 1]                            # every arm once per seed
      metric: {name: reward, goal: maximize}   # what the comparison ranks by (default: the
                                               # kind's headline metric)
      mode: grid                               # or random, with samples: N
      max_parallel: 4                          # at most 4 runs at once, the rest queue
      early_stop: {at_step: 50}                # GRPO: stop arms beyond noise behind the leader

Grid (the default) takes every combination; `mode: random` draws `samples` arms, each key's
value from its list or from a range `{low, high, log}` (seeded by `sweep.seed`, so the
same sweep draws the same arms). Each arm is the base spec with its overrides applied, and
is named by them (`learning_rate=0.001,r=8`, as tinker-cookbook's sweeps name their runs).
The arms are validated as whole specs by the caller (posttrain.tools.experiments), which
names the arm and the key of any that is invalid; here the keys are checked against the
spec's model, so a misspelt key is refused before any arm is built.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from posttrain.core.errors import ConfigError
from posttrain.spec.messages import fields_at

MAX_ARMS = 16
MAX_RUNS = 32  # arms x seeds
MAX_VALUES = 16  # values of one key
CONTROL = ("mode", "samples", "seeds", "metric", "seed", "max_parallel", "early_stop")
# Keys people write without their section: `lora.r` is `algorithm.lora.r`.
SHORT = {"lora": "algorithm.lora", "learning_rate": "algorithm.learning_rate"}
# Fields whose string shorthand names the thing (`model: Qwen3-4B`): a swept string sets
# their `name` and keeps the rest of the base's section (its template kwargs, its params).
NAMED = ("model", "reward", "environment")


class Range(BaseModel):
    """A range to draw from in random mode; `log: true` draws evenly in log space."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    low: float
    high: float
    log: bool = False
    integer: bool = False


class Metric(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field("reward", description="The evaluation metric the arms are ranked by.")
    goal: Literal["maximize", "minimize"] = "maximize"


class EarlyStop(BaseModel):
    """At a checkpoint, stop the arms that are beyond noise behind the leader (GRPO arms:
    their training reward per prompt over the last `window` steps, seeds as replicates)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    at_step: int | None = Field(
        None, ge=1, description="The step every arm's runs are compared at (or at_fraction)."
    )
    at_fraction: float | None = Field(
        None, gt=0, lt=1, description="...or this share of algorithm.steps (0.25: a quarter)."
    )
    window: int | None = Field(
        None,
        ge=1,
        description="Steps of training reward compared, ending at the checkpoint; None: the "
        "last half of the steps before it.",
    )

    def step(self, steps: int) -> int:
        """The checkpoint's step for runs of `steps` steps."""
        if self.at_step is not None:
            return self.at_step
        return max(1, round((self.at_fraction or 0.5) * steps))

    def span(self, steps: int) -> int:
        return self.window or max(1, self.step(steps) // 2)


class Sweep(BaseModel):
    """The sweep block, its control keys parsed; `values` holds the swept spec keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    values: dict[str, list[Any] | Range]
    mode: Literal["grid", "random"] = "grid"
    samples: int | None = Field(None, ge=1, le=MAX_ARMS)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1, max_length=MAX_RUNS)
    metric: Metric | None = Field(
        None,
        description="What the comparison ranks the arms by; None: the kind's headline metric "
        "(reward for GRPO and rewarded SFT, reference_nll for SFT and distillation without a "
        "reward, preference_accuracy for DPO, feedback_loglik for KTO).",
    )
    seed: int = Field(0, description="Seeds random mode's draws.")
    max_parallel: int | None = Field(
        None,
        ge=1,
        le=MAX_RUNS,
        description="At most this many of the experiment's runs at once; the rest queue "
        "(reserved and approved with the rest) and start as earlier ones end. The price is "
        "the same; the wall time grows to about ceil(runs / max_parallel) runs. None: all at once.",
    )

    early_stop: EarlyStop | None = Field(
        None, description="Opt-in: stop arms beyond noise behind the leader at a checkpoint."
    )

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"give distinct seeds (got {seeds})")
        return seeds


class Arm(BaseModel):
    name: str = Field(description="Named by its overrides: `learning_rate=0.001,r=8`.")
    overrides: dict[str, Any] = Field(description="The swept keys and their values.")
    spec: dict[str, Any] = Field(description="The base spec with the overrides applied.")


def split_sweep(data: dict[str, Any]) -> tuple[dict[str, Any], Sweep | None]:
    """The base spec and its sweep (None when the spec has no `sweep:`)."""
    if "sweep" not in data:
        return data, None
    base = {k: v for k, v in data.items() if k != "sweep"}
    raw = data["sweep"]
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(
            "spec field 'sweep': give a mapping of dotted spec keys to lists of values, e.g. "
            "{algorithm.learning_rate: [1.0e-5, 5.0e-5], seeds: [0, 1]}"
        )
    control = {k: v for k, v in raw.items() if k in CONTROL}
    values = {_full_key(str(k)): v for k, v in raw.items() if k not in CONTROL}
    if not values:
        raise ConfigError(
            "spec field 'sweep': it names no spec key to vary; add one, e.g. "
            "algorithm.learning_rate: [1.0e-5, 5.0e-5]"
        )
    for key, value in values.items():
        if isinstance(value, list) and not 1 <= len(value) <= MAX_VALUES:
            raise ConfigError(f"sweep key '{key}': give 1 to {MAX_VALUES} values")
    try:
        sweep = Sweep(values=values, **control)
    except ValidationError as exc:
        problems = "; ".join(
            f"sweep.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(
            f"spec field 'sweep': {problems}. A key's values are a list (grid), or in random "
            f"mode also a range {{low, high, log}}"
        ) from None
    for key, value in sweep.values.items():
        if isinstance(value, Range) and sweep.mode == "grid":
            raise ConfigError(
                f"sweep key '{key}': a range needs `mode: random` (with samples: N); a grid "
                f"takes a list of values"
            )
    if sweep.early_stop is not None:
        e = sweep.early_stop
        if (e.at_step is None) == (e.at_fraction is None):
            raise ConfigError(
                "spec field 'sweep.early_stop': give one of at_step: N (a step) or "
                "at_fraction: F (a share of algorithm.steps, 0 < F < 1), e.g. {at_step: 50}"
            )
    if sweep.mode == "random" and sweep.samples is None:
        raise ConfigError("spec field 'sweep.samples': random mode needs samples: N (arms)")
    return base, sweep


def _full_key(key: str) -> str:
    head, _, rest = key.partition(".")
    return f"{SHORT[head]}.{rest}".rstrip(".") if head in SHORT else key


def check_keys(sweep: Sweep, model: type[BaseModel]) -> None:
    """Every swept key is a field of the spec (or lies inside a free mapping, such as
    reward.params); a misspelt one is refused with the fields allowed where it went wrong."""
    for key in sweep.values:
        parts = key.split(".")
        for i, part in enumerate(parts):
            fields = fields_at(model, tuple(parts[:i]))
            if not fields:
                break  # a free mapping (reward.params): its keys are the reward's to check
            if part not in fields:
                where = ".".join(parts[:i]) or "the spec"
                close = difflib.get_close_matches(part, fields, n=1, cutoff=0.6)
                hint = f"did you mean '{'.'.join([*parts[:i], close[0]])}'? " if close else ""
                raise ConfigError(
                    f"sweep key '{key}': '{part}' is not a field of {where}; {hint}fields "
                    f"there: {fields}"
                )


def arms(base: dict[str, Any], sweep: Sweep) -> list[Arm]:
    """The arms in a stable order: every combination (grid) or `samples` draws (random)."""
    keys = list(sweep.values)
    if sweep.mode == "grid":
        lists = [sweep.values[k] for k in keys]
        combos = list(itertools.product(*lists))  # type: ignore[arg-type]
    else:
        rng = random.Random(sweep.seed)
        combos = [
            tuple(_draw(sweep.values[k], rng) for k in keys) for _ in range(sweep.samples or 1)
        ]
    overrides = [dict(zip(keys, combo, strict=True)) for combo in combos]
    unique = list({json.dumps(o, sort_keys=True, default=str): o for o in overrides}.values())
    if len(unique) > MAX_ARMS:
        raise ConfigError(
            f"spec field 'sweep': {len(unique)} arms, more than {MAX_ARMS}; sweep fewer values "
            f"or use mode: random with samples: N"
        )
    runs = len(unique) * len(sweep.seeds)
    if runs > MAX_RUNS:
        raise ConfigError(
            f"spec field 'sweep': {len(unique)} arms x {len(sweep.seeds)} seeds = {runs} runs, "
            f"more than {MAX_RUNS}; fewer arms or seeds"
        )
    names = _names(keys)
    return [
        Arm(
            name=",".join(f"{names[k]}={_text(v)}" for k, v in o.items()),
            overrides=o,
            spec=_apply(base, o),
        )
        for o in unique
    ]


def _draw(value: list[Any] | Range, rng: random.Random) -> Any:
    if isinstance(value, list):
        return rng.choice(value)
    if value.log:
        if value.low <= 0:
            raise ConfigError("sweep range: log: true needs low > 0")
        x = math.exp(rng.uniform(math.log(value.low), math.log(value.high)))
    else:
        x = rng.uniform(value.low, value.high)
    return round(x) if value.integer else float(f"{x:.4g}")


def _names(keys: list[str]) -> dict[str, str]:
    """Each key by its last part, unless two keys share it: then whole."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (n if last.count(n) == 1 else k) for k, n in zip(keys, last, strict=True)}


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str | int | bool) or value is None:
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _apply(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    spec = json.loads(json.dumps(base))  # a deep copy of plain data
    for key, value in overrides.items():
        parts = key.split(".")
        node = spec
        for part in parts[:-1]:
            if isinstance(node.get(part), str) and part in NAMED:
                node[part] = {"name": node[part]}
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        last = parts[-1]
        if (
            last in NAMED
            and node is spec
            and isinstance(value, str)
            and isinstance(node.get(last), dict)
        ):
            node[last] = {**node[last], "name": value}
        else:
            node[last] = value
    return spec
