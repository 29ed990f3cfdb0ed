"""The `judge` reward: an OpenAI-compatible chat model scores completions against a rubric.

    reward: {name: judge, params: {rubric: "...", base_url: http://127.0.0.1:8011/v1,
             model: my-judge, api_key_env: JUDGE_KEY, mode: group}}

Group mode sends one request per prompt with all its completions (TRL lays each prompt's
generations side by side), scored relative to each other, as ART's RULER does: GRPO needs only
the ranking within a group. Single mode asks once per completion. `rubric` is text or named,
weighted criteria (a reason before each verdict, as verifiers writes them), or `rubric_file`.
A `gate` reward multiplies the judge (a format rule times the judge), and where the gate is 0
the judge is not asked. An answer the judge cannot grade scores None: TRL leaves it out of the
group's baseline and trains nothing on it; an endpoint that stays down fails the run.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from posttrain.core.errors import ConfigError
from posttrain.core.paths import confine, expand, home
from posttrain.rewards.base import Reward, Scores, build_reward, column
from posttrain.rewards.judge.cache import JudgeCache
from posttrain.rewards.judge.client import Endpoint, Group, judge_groups, reachable
from posttrain.rewards.text import completion_text, strip_thinking

CRITERIA_HEAD = (
    "You are a strict judge. Grade each answer by the criteria below (weights in brackets). "
    "For every criterion, reason briefly before its verdict; then give the answer one overall "
    "score from 0 to 1: the weighted mean of its criteria."
)


@dataclass(frozen=True)
class Criterion:
    name: Annotated[str, Field(min_length=1, max_length=200)]
    description: Annotated[str, Field(min_length=1, max_length=4000)]
    weight: Annotated[float, Field(gt=0, le=100)] = 1.0


@dataclass(frozen=True)
class GateRef:
    """Another reward that multiplies the judge: {name, params}."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tally:
    """What the judge cost this process: requests sent, verdicts from the cache, answers the
    judge could not grade."""

    requests: int = 0
    cache_hits: int = 0
    judged: int = 0
    ungraded: int = 0
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "judged": self.judged,
            "ungraded": self.ungraded,
            "problems": self.problems[:5],
        }


_TALLIES: dict[int, Tally] = {}
_CACHES: dict[Path, JudgeCache] = {}


@dataclass(frozen=True)
class JudgeReward(Reward):
    name: ClassVar[str] = "judge"
    headline: ClassVar[tuple[str, ...]] = ("judge",)
    judged: ClassVar[bool] = True

    rubric: str | list[Criterion] = ""
    base_url: str = ""
    model: str = ""
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    # on Modal: the Modal secret that sets api_key_env in the trainer's container
    api_key_secret: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = (
        None
    )
    mode: Literal["group", "single"] = "group"
    reference_column: str | None = None
    gate: GateRef | None = None
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 60.0
    retries: Annotated[int, Field(ge=0, le=10)] = 3
    max_concurrency: Annotated[int, Field(ge=1, le=64)] = 4
    max_tokens: Annotated[int, Field(ge=16, le=8192)] = 512
    max_group: Annotated[int, Field(ge=1, le=64)] = 16  # answers in one group request
    price_per_mtok: tuple[float, float] | None = None  # USD per million tokens [in, out]
    cache: bool = True

    def __post_init__(self) -> None:
        # the tally lives beside the reward (a frozen dataclass), and goes with it: an id of
        # a reward gone may be reused by the next
        weakref.finalize(self, _TALLIES.pop, id(self), None)

    @classmethod
    def from_params(
        cls, build: Callable[[str, dict[str, Any]], Reward], **params: Any
    ) -> JudgeReward:
        """The reward from a spec's params; `build` makes the gate (the registry's get_reward,
        which holds this reward too)."""
        params = inline_rubric(params)
        reward = build_reward(cls, params, cls.name)
        missing = [p for p in ("rubric", "base_url", "model") if not getattr(reward, p)]
        if missing:
            raise ConfigError(
                f"reward 'judge' needs params {missing}: rubric (text, criteria or "
                f"rubric_file), base_url (an OpenAI-compatible endpoint, e.g. "
                f"http://127.0.0.1:8011/v1 from `transformers serve MODEL --port 8011`) and model"
            )
        if not reward.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"reward 'judge': params.base_url {reward.base_url!r} is no http(s) URL; "
                f"give the endpoint's base, e.g. http://127.0.0.1:8011/v1"
            )
        from posttrain.rewards.judge.price import price_of

        price_of(reward)  # a paid judge with no price it can state is refused here
        gate = None
        if reward.gate is not None:  # built once, now, so a bad gate is said at load
            if reward.gate.name == cls.name:
                raise ConfigError("reward 'judge': params.gate cannot be another judge")
            gate = build(reward.gate.name, reward.gate.params)
        object.__setattr__(reward, "_gate", gate)  # not a parameter: pickled with the reward
        return reward

    # -- what the reward declares ---------------------------------------------------------
    @property
    def components(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("judge", "gate") if self.gate is not None else ("judge",)

    @property
    def value_range(self) -> tuple[float, float]:  # type: ignore[override]
        if self.gate is None:
            return (0.0, 1.0)
        low, high = self.gate_reward.value_range
        return (min(0.0, low), max(0.0, high))

    @property
    def columns(self) -> tuple[str, ...]:
        own = (self.reference_column,) if self.reference_column else ()
        gated = self.gate_reward.columns if self.gate is not None else ()
        return tuple(dict.fromkeys((*own, *gated)))

    @property
    def gate_reward(self) -> Reward:
        gate = getattr(self, "_gate", None)
        if gate is None:
            raise ConfigError("reward 'judge': build it with JudgeReward.from_params (its gate)")
        return gate

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(
            base_url=self.base_url,
            model=self.model,
            api_key_env=self.api_key_env,
            timeout_s=self.timeout_s,
            retries=self.retries,
            max_concurrency=self.max_concurrency,
            max_tokens=self.max_tokens,
        )

    @property
    def rubric_text(self) -> str:
        return render_rubric(self.rubric)

    @property
    def tally(self) -> Tally:
        return _TALLIES.setdefault(id(self), Tally())

    def usage(self) -> dict[str, Any]:
        return {"endpoint": self.base_url, "mode": self.mode, **self.tally.as_dict()}

    def ready(self) -> str:
        return reachable(self.endpoint)

    @property
    def free(self) -> bool:
        from posttrain.rewards.judge.price import price_of

        return price_of(self)[0] == (0.0, 0.0)

    def refuse_unpriced(self, where: str) -> None:
        """Where posttrain cannot yet put the judge's calls in a price to approve (check_reward
        and evaluate), a judge that charges is refused rather than spent unasked."""
        if not self.free:
            raise ConfigError(
                f"{where} would call the paid judge at {self.base_url}, and posttrain cannot "
                f"yet price those calls for your approval there (only plan and launch do): use "
                f"a judge on this machine for it, or params.price_per_mtok: [0, 0] for your own "
                f"free server"
            )

    # -- scoring --------------------------------------------------------------------------
    def score(self, completions: Sequence[Any], **columns: Any) -> Scores:
        from posttrain.rewards.guards import checked_scores

        n = len(completions)
        prompts = columns.get("prompts") or [""] * n
        answers = [strip_thinking(completion_text(c)).strip() for c in completions]
        questions = [question_text(p) for p in prompts]
        references = (
            [
                None if v is None else str(v)
                for v in column(columns, self.reference_column, n, "judge")
            ]
            if self.reference_column
            else [None] * n
        )
        gates = (
            checked_scores(self.gate_reward, completions, **columns).rewards
            if self.gate is not None
            else [1.0] * n
        )
        asked = [i for i in range(n) if gates[i] != 0]
        groups, members = self._groups(asked, questions, answers, references)
        cache = self._cache()
        hits = cache.hits if cache else 0
        verdicts = judge_groups(self.endpoint, self.rubric_text, groups, self.mode, cache)
        judge: list[float | None] = [None] * n
        reasons: list[str | None] = [None] * n
        tally = self.tally
        for verdict, indices in zip(verdicts, members, strict=True):
            tally.requests += verdict.asked
            tally.problems += verdict.problems
            for i, value, reason in zip(indices, verdict.scores, verdict.reasons, strict=True):
                judge[i], reasons[i] = value, reason
        tally.judged += len(asked)
        tally.cache_hits += (cache.hits - hits) if cache else 0
        ungraded = [i for i in asked if judge[i] is None]
        tally.ungraded += len(ungraded)
        rewards = [
            0.0 if gates[i] == 0 else (None if judge[i] is None else gates[i] * judge[i])
            for i in range(n)
        ]
        components: dict[str, list[Any]] = {"judge": judge}
        if self.gate is not None:
            components["gate"] = gates
        notes = []
        if ungraded:
            problems = sorted({p for v in verdicts for p in v.problems})[:3]
            notes.append(
                f"judge could not grade {len(ungraded)} of {len(asked)} answers (scored None: "
                f"left out of training): {'; '.join(problems) or 'no reason given'}"
            )
        return Scores(rewards=rewards, components=components, notes=notes, reasons=reasons)

    def _groups(
        self,
        asked: list[int],
        questions: list[str],
        answers: list[str],
        references: list[str | None],
    ) -> tuple[list[Group], list[list[int]]]:
        """A prompt's completions side by side (as TRL lays them out) form a group, less those
        the gate spared the judge, at most max_group answers a request."""
        runs: list[list[int]] = []
        for i in range(len(questions)):
            key = (questions[i], references[i])
            if runs and (questions[runs[-1][0]], references[runs[-1][0]]) == key:
                runs[-1].append(i)
            else:
                runs.append([i])
        wanted = set(asked)
        members = [
            chunk[at : at + self.max_group]
            for run in runs
            if (chunk := [i for i in run if i in wanted])
            for at in range(0, len(chunk), self.max_group)
        ]
        groups = [
            Group(questions[m[0]], [answers[i] for i in m], references[m[0]]) for m in members
        ]
        return groups, members

    def _cache(self) -> JudgeCache | None:
        if not self.cache:
            return None
        path = home() / "judge_cache.sqlite"  # opened once a process (a test may move home)
        if path not in _CACHES:
            _CACHES[path] = JudgeCache(path)
        return _CACHES[path]


def modal_problem(params: Mapping[str, Any]) -> str | None:
    """Why a judge cannot serve a trainer on Modal, or None: an endpoint on this machine is
    not reachable from Modal's container, and a key read from this machine's environment is
    not there either (a Modal secret carries it)."""
    from urllib.parse import urlsplit

    from posttrain.core.net import is_loopback

    url = str(params.get("base_url") or "")
    if is_loopback(urlsplit(url).hostname or ""):
        return (
            f"reward 'judge': params.base_url {url} is this machine, which a trainer on Modal "
            f"cannot reach; give an endpoint reachable from Modal (and its price), or train "
            f"with compute.backend 'local'"
        )
    if params.get("api_key_env") and not params.get("api_key_secret"):
        name = params["api_key_env"]
        return (
            f"reward 'judge': on Modal the trainer reads {name} in its own container, not "
            f"here; create a Modal secret that sets {name} (`modal secret create my-judge-key "
            f"{name}=...`) and name it in params.api_key_secret"
        )
    return None


def question_text(prompt: Any) -> str:
    """What the judge is shown as the question: a text prompt, or a chat's turns after its
    system prompt (one user turn: its text alone)."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, Sequence):
        return "" if prompt is None else str(prompt)
    turns = [m for m in prompt if isinstance(m, Mapping) and m.get("role") != "system"]
    if len(turns) == 1:
        return completion_text([{"role": "assistant", "content": turns[0].get("content")}])
    return "\n\n".join(f"{m.get('role')}: {m.get('content') or ''}" for m in turns)


def render_rubric(rubric: str | Sequence[Criterion]) -> str:
    """The system message: a text rubric as written, criteria as a weighted list."""
    if isinstance(rubric, str):
        return rubric
    lines = [f"- {c.name} [weight {c.weight:g}]: {c.description}" for c in rubric]
    return CRITERIA_HEAD + "\n" + "\n".join(lines)


def inline_rubric(params: Mapping[str, Any], roots: list[Path] | None = None) -> dict[str, Any]:
    """params with `rubric_file` read into `rubric` (confined to the roots where given), so a
    spec carries its rubric: the trainer (on Modal too) and the run's id see the text."""
    params = dict(params)
    if "rubric_file" not in params:
        return params
    ref = params.pop("rubric_file")
    if params.get("rubric"):
        raise ConfigError("reward 'judge': give params.rubric or params.rubric_file, not both")
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"reward 'judge': params.rubric_file must be a path, not {ref!r}")
    path = confine(ref, "rubric file", roots) if roots is not None else expand(ref)
    try:
        params["rubric"] = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"reward 'judge': params.rubric_file {ref!r} cannot be read ({exc}); give a UTF-8 "
            f"text file"
        ) from None
    return params
