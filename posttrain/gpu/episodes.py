"""Held-out episodes, played as TRL plays a rollout, for evaluate, the held-out curve and the
dry run: sample an assistant turn through the chat template (tools in the system turn), run
each <tool_call> in it through the bounded environment, append the results as `tool`
messages, and sample again, until a turn calls no tool, a call is malformed (TRL decodes it
as plain text and the episode ends), or `max_turns` tool-calling turns have run.

Each turn gets `max_new_tokens` (TRL's budget covers the whole episode; here each of the
few held-out turns gets the same budget, so a base and a trained model are measured alike).
"""

from __future__ import annotations

from typing import Any

from posttrain.data.toolcalls import TOOL_CALL_TAG, tagged_calls
from posttrain.environments.bounded import BoundedEnvironment, ToolFailed, tool_schemas
from posttrain.environments.transcript import transcript
from posttrain.rewards.guards import score_rows

TURN_SEED_STRIDE = 1009  # each turn samples with its own seed, fixed by the pass's seed


def with_observation(prompt: list[dict[str, Any]], observation: str | None) -> list[dict[str, Any]]:
    """The prompt with reset()'s text appended to its last turn, as TRL appends it."""
    if not observation:
        return list(prompt)
    last = prompt[-1]
    return [*prompt[:-1], {**last, "content": str(last.get("content") or "") + observation}]


def run_call(env: BoundedEnvironment, tools: set[str], name: str, arguments: dict[str, Any]) -> str:
    """One call as TRL makes it: an unknown tool or a failure becomes {'error': ...}."""
    if name not in tools:
        return str({"error": f"Tool {name} not found."})
    try:
        return str(getattr(env, name)(**arguments))
    except ToolFailed as exc:
        return str({"error": str(exc)})


def play_episodes(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    env_cls: type[BoundedEnvironment],
    reward: Any,
    *,
    k: int,
    seed: int,
    max_new_tokens: int,
    temperature: float,
    template_kwargs: dict[str, Any],
    max_turns: int,
) -> list[list[dict[str, Any]]]:
    """[row][sample] episodes: {"messages" (after the prompt), "prompt", "reward",
    "components", "episode" (posttrain.environments.transcript), "text" (the last turn)}."""
    from posttrain.gpu.generate import sample

    plays = [(i, env_cls()) for i in range(len(rows)) for _ in range(k)]
    prompts = [with_observation(rows[i]["prompt"], env.reset(**rows[i])) for i, env in plays]
    schemas = tool_schemas(plays[0][1]) if plays else []
    tools = {s["function"]["name"] for s in schemas}
    messages: list[list[dict[str, Any]]] = [[] for _ in plays]
    active = list(range(len(plays)))
    for turn in range(max_turns + 1):
        if not active:
            break
        texts = sample(
            model,
            tokenizer,
            [prompts[j] + messages[j] for j in active],
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            template_kwargs=template_kwargs,
            seed=seed + TURN_SEED_STRIDE * turn,
            tools=[schemas] * len(active),
        )
        still = []
        for j, text in zip(active, texts, strict=True):
            blocks = tagged_calls(text)
            calls = [call for _, call in blocks]
            if not blocks or any(c is None for c in calls) or turn == max_turns:
                messages[j].append({"role": "assistant", "content": text})
                continue  # a final answer, a malformed call, or the turn bound
            wire = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
            content = TOOL_CALL_TAG.sub("", text).strip()
            messages[j].append({"role": "assistant", "content": content, "tool_calls": wire})
            env = plays[j][1]
            for name, arguments in calls:  # type: ignore[misc]
                result = run_call(env, tools, name, arguments)
                messages[j].append({"role": "tool", "name": name, "content": result})
            still.append(j)
        active = still
    picked = [rows[i] for i, _ in plays]
    scores = score_rows(reward, messages, picked_with(picked, [env for _, env in plays]))
    out: list[list[dict[str, Any]]] = [[] for _ in rows]
    for j, (i, env) in enumerate(plays):
        read = transcript(messages[j])
        read["observation"] = env._episode.observation
        out[i].append(
            {
                "prompt": prompts[j],
                "messages": messages[j],
                "reward": scores.rewards[j],
                "components": scores.row(j),
                "episode": read,
                "text": messages[j][-1]["content"] if messages[j] else "",
            }
        )
    return out


def picked_with(rows: list[dict[str, Any]], envs: list[BoundedEnvironment]) -> list[dict]:
    """Rows as score_rows passes them, each with its episode's environment (TRL's
    `environments` column)."""
    return [{**row, "environments": env} for row, env in zip(rows, envs, strict=True)]
