"""The environment's parts, in process and fast: the call parser, the episode runner's
bounds, the verdicts, and the built-in calculator. (End to end, through the isolated child,
the MCP server and the CLI: test_environments.py.)"""

import pytest

from posttrain.core.errors import ConfigError
from posttrain.data.toolcalls import tagged_calls
from posttrain.environments.calculator import Calculator, rows
from posttrain.environments.episode import Bounds, play
from posttrain.environments.loader import load
from posttrain.environments.scenarios import run_scenarios
from posttrain.environments.verdicts import verdicts

BOUNDS = Bounds(max_turns=3, tool_timeout_s=1.0, max_result_chars=50)


def test_tool_calls_in_text_are_read_in_both_shapes_and_malformed_ones_are_none():
    text = (
        '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>\n'
        '<tool_call>{"type": "function", "function": {"name": "add", "arguments": "{\\"a\\": 2}"}}'
        '</tool_call>\n<tool_call>{"name": "add", "arguments": {</tool_call>'
    )
    assert [call for _, call in tagged_calls(text)] == [("add", {"a": 1}), ("add", {"a": 2}), None]


def test_the_calculator_pays_the_demonstration_and_nothing_for_prose():
    loaded = load("calculator", None)
    found = []
    meta = run_scenarios(loaded, rows()[:2], BOUNDS, "demo", None, None, found.append)
    episodes = {e["episode"]: e for e in found if "episode" in e}
    assert [t["function"]["name"] for t in meta["tools"]] == ["calculate", "submit_answer"]
    assert episodes["demo"]["rewards"] == {"environment": 1.0}
    assert episodes["no_call"]["rewards"] == {"environment": 0.0}
    assert episodes["same_call_forever"]["stopped_at_turn_bound"]
    assert verdicts(list(episodes.values()), meta, 50)[0] == []


def test_the_calculator_evaluates_arithmetic_and_nothing_else():
    calc = Calculator()
    calc.reset(answer=12)
    assert calc.calculate("(12 + 3) * 4") == "60"
    assert calc.calculate("__import__('os').system('true')").startswith("error:")
    assert calc.calculate("2 ** 10 ** 10").startswith("error:")  # no powers: no huge numbers
    assert calc.submit_answer(12) == "Answer recorded." and calc.get_reward() == 1.0


def test_plain_function_tools_play_and_an_unscored_environment_is_flagged(tmp_path):
    (tmp_path / "tools.py").write_text(
        "def shout(text: str) -> str:\n"
        '    """Say it loudly.\n\n    Args:\n        text: What to say.\n    """\n'
        "    return text.upper() * 100\n"
    )
    loaded = load(None, f"{tmp_path / 'tools.py'}:[shout]")
    episode = play(
        loaded, {}, ['<tool_call>{"name": "shout", "arguments": {"text": "hi"}}'], BOUNDS
    )
    call = episode.turns[0].calls[0]
    assert call.ok and call.cut and call.result_chars == 200 and len(call.result) == 50
    assert len(episode.turns) == BOUNDS.max_turns + 1 and episode.stopped_at_turn_bound
    flagged, _ = verdicts([{"episode": "no_call", "rewards": {}}], {}, 50)
    assert "no episode was scored" in flagged[0]


def test_a_tool_that_sleeps_is_stopped_at_its_bound_even_if_it_catches_exceptions(tmp_path):
    (tmp_path / "slow.py").write_text(
        "import time\n"
        "def wait(seconds: int) -> str:\n"
        '    """Wait.\n\n    Args:\n        seconds: How long.\n    """\n'
        "    try:\n        time.sleep(seconds)\n    except Exception:\n        return 'caught'\n"
        "    return 'done'\n"
    )
    loaded = load(None, f"{tmp_path / 'slow.py'}:[wait]")
    bounds = Bounds(max_turns=1, tool_timeout_s=0.2, max_result_chars=50)
    script = ['<tool_call>{"name": "wait", "arguments": {"seconds": 100}}', "done"]
    call = play(loaded, {}, script, bounds).turns[0].calls[0]
    assert not call.ok and call.error == "did not return within 0.2 s (stopped)"


def test_the_specs_reward_and_the_environments_are_summed_as_components(tmp_path):
    from posttrain.environments.child import _scorer
    from posttrain.environments.verdicts import total

    (tmp_path / "bonus.py").write_text(
        "def used_calculator(completions, **columns):\n"
        "    return [0.5 if any(m['role'] == 'tool' for m in c) else 0.0 for c in completions]\n"
    )
    found = []
    score = _scorer(f"{tmp_path / 'bonus.py'}:used_calculator", {})
    run_scenarios(load("calculator", None), rows()[:1], BOUNDS, "demo", None, score, found.append)
    episodes = {e["episode"]: e for e in found if "episode" in e}
    demo = episodes["demo"]["rewards"]
    assert demo == {"environment": 1.0, f"{tmp_path / 'bonus.py'}:used_calculator": 0.5}
    assert total(episodes["demo"]) == 1.5 and total(episodes["no_call"]) == 0.0


def test_every_tool_is_called_within_the_turn_bound_and_a_demo_longer_than_it_is_flagged():
    loaded = load("calculator", None)
    tight = Bounds(max_turns=1, tool_timeout_s=1.0, max_result_chars=50)
    found = []
    meta = run_scenarios(loaded, rows()[:1], tight, "demo", None, None, found.append)
    episodes = {e["episode"]: e for e in found if "episode" in e}
    called = [c["name"] for t in episodes["every_tool"]["turns"] for c in t["calls"]]
    assert called == ["calculate", "submit_answer"]  # two calls in the one turn allowed
    assert not episodes["every_tool"]["stopped_at_turn_bound"]
    flagged, _ = verdicts(list(episodes.values()), meta, 50)
    assert any(
        f.startswith("demo: the demonstration needs more tool-calling turns") for f in flagged
    )


def test_an_environment_whose_constructor_hangs_is_a_clear_error_within_the_bound(tmp_path):
    (tmp_path / "stuck.py").write_text(
        "import time\nclass Stuck:\n    def __init__(self):\n        time.sleep(100)\n"
        "    def reset(self, **row):\n        return None\n"
    )
    bounds = Bounds(max_turns=1, tool_timeout_s=0.2, max_result_chars=50)
    with pytest.raises(ConfigError, match=r"creating the environment failed: did not return"):
        run_scenarios(
            load(f"{tmp_path / 'stuck.py'}:Stuck", None), [], bounds, None, None, None, print
        )
