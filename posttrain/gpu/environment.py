"""Training in an environment: what GRPO needs beyond single-turn answers.

`setup(job)` loads the spec's environment in the trainer process (user code runs here and in
evaluate's generator, as reward files do; never in the server), behind posttrain's bounds
(posttrain.environments.bounded), checks that the model's chat template can render a tool
conversation, and returns what run_grpo hands TRL: the environment factory, the episode
reward (get_reward plus the spec's reward) and the episode describer traces use.

`demo_episodes(spec, rows)` is the warm-start's data for an environment spec with a
`demo_column`: each row's demonstration played through the environment (its real tool results,
behind the same bounds), as the conversation a rollout makes: one assistant turn per call,
each followed by its tool result, then a last assistant turn (the row's reference, if any),
rendered with the tools in the system turn. So SFT teaches the episode's format, turn by turn,
before GRPO samples it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.data.toolcalls import call_parts
from posttrain.environments.bounded import BoundedEnvironment, bounded_class, tool_schemas
from posttrain.environments.episode import Bounds
from posttrain.environments.episode_reward import EpisodeReward
from posttrain.environments.loader import load
from posttrain.environments.transcript import transcript
from posttrain.spec.schema import EnvironmentSpec, RunSpec

RENDERED_CHARS = 12_000  # of an episode's rendered text kept in a trace


def bounds_of(env: EnvironmentSpec) -> Bounds:
    return Bounds(env.max_turns, env.tool_timeout_s, env.max_result_chars)


def environment_class(
    spec: RunSpec, rows: list[dict[str, Any]] | None = None
) -> type[BoundedEnvironment]:
    """The spec's environment behind its bounds: TRL's `environment_factory`."""
    env = spec.environment
    assert env is not None
    return bounded_class(load(env.name, env.tools), bounds_of(env), rows)


def episode_reward(reward: Any) -> EpisodeReward:
    """The reward of an episode: get_reward() plus the spec's reward (if any)."""
    return reward if isinstance(reward, EpisodeReward) else EpisodeReward(inner=reward)


def check_template(tokenizer: Any, model: str) -> None:
    """Refuse, before any step, a chat template that cannot show the model its tool calls
    and their results (TRL would refuse it too, in words about Jinja)."""
    from trl.chat_template_utils import supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise ConfigError(
            f"{model}'s chat template cannot render a tool conversation (an assistant turn "
            f"with tool calls, then tool results), so the model could never see its tools "
            f"work; train environments on a model whose template renders tools (the Qwen "
            f"families do)"
        )
    has_parser = getattr(tokenizer, "response_template", None) or getattr(
        tokenizer, "response_schema", None
    )
    if not has_parser:
        from trl.chat_template_utils import add_response_schema

        try:
            add_response_schema(tokenizer)
        except ValueError:
            raise ConfigError(
                f"{model}'s chat template is not one TRL can read tool calls back from (it "
                f"knows the Qwen, Llama 3, GLM and gpt-oss templates); use a model with one"
            ) from None


def demo_episodes(spec: RunSpec, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SFT rows (prompt with reset()'s text, completion: the played demonstration, tools)
    from the rows that hold a demonstration; see the module docstring."""
    from posttrain.gpu.episodes import run_call, with_observation

    env_spec = spec.environment
    assert env_spec is not None and env_spec.demo_column
    column, reference = env_spec.demo_column, spec.dataset.reference_column
    cls = environment_class(spec)
    out = []
    for row in rows:
        demo = row.get(column)
        if demo in (None, "", []):
            continue
        calls = [call_parts(c) for c in (demo if isinstance(demo, list) else [demo])]
        if any(c is None for c in calls):
            raise ConfigError(
                f"row {row.get('id', '?')!r}: environment.demo_column '{column}' holds "
                f"something that is not a tool call ({{name, arguments}} or the wire shape)"
            )
        env = cls()
        prompt = with_observation(row["prompt"], env.reset(**row))
        schemas = tool_schemas(env)
        tools = {s["function"]["name"] for s in schemas}
        completion: list[dict[str, Any]] = []
        for name, arguments in calls:  # type: ignore[misc]
            wire = {"type": "function", "function": {"name": name, "arguments": arguments}}
            completion.append({"role": "assistant", "content": "", "tool_calls": [wire]})
            result = run_call(env, tools, name, arguments)
            completion.append({"role": "tool", "name": name, "content": result})
        final = row.get(reference) if reference else None
        completion.append({"role": "assistant", "content": "" if final is None else str(final)})
        out.append({**row, "prompt": prompt, "completion": completion, "tools": schemas})
    if not out:
        raise ConfigError(
            f"the warm-start plays each row's demonstration (environment.demo_column "
            f"'{column}'), and no training row has one; fill the column, or drop the "
            f"warm-start"
        )
    return out


@dataclass
class EpisodeDescriber:
    """A trace's view of an episode: its turns, calls and results, the final answer, and
    the whole conversation as the chat template renders it (tools in the system turn)."""

    tokenizer: Any
    template_kwargs: dict[str, Any]

    def __call__(self, prompt: Any, completion: Any, env: Any) -> dict[str, Any]:
        read = transcript(completion)
        schemas = tool_schemas(env) if env is not None else None
        episode = env._episode if env is not None else None
        read["observation"] = episode.observation if episode else None
        read["seconds_in_tools"] = (
            round(sum(c.seconds for c in episode.calls), 3) if episode else None
        )
        return {"episode": read, "rendered": self.render(prompt, completion, schemas)}

    def render(self, prompt: Any, completion: Any, schemas: list[dict[str, Any]] | None) -> str:
        messages = (
            list(prompt) if not isinstance(prompt, str) else [{"role": "user", "content": prompt}]
        )
        messages += (
            completion
            if not isinstance(completion, str)
            else [{"role": "assistant", "content": completion}]
        )
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=schemas or None, tokenize=False, **self.template_kwargs
            )
        except Exception as exc:  # a template error must not stop training: say it in the trace
            return f"(the chat template could not render this episode: {type(exc).__name__}: {exc})"
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return text if len(text) <= RENDERED_CHARS else text[:RENDERED_CHARS] + "..."
