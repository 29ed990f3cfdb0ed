"""A user's reward meets each completion in one shape wherever it runs: its text. TRL hands a
chat answer to a reward as a list of one assistant message; `reward check` hands probes as
text. A reward written for text (`c.strip()`) passed the check and crashed at training's
first step ('list' object has no attribute 'strip'). Here one reward file records what it was
given, in reward check and in a real tiny GRPO run of a labelling spec with no reference
column (whose proof step scored the label column as the honest answers)."""

import json

import pytest

from posttrain.rewards.user import answer_of
from posttrain.runs.context import Context
from posttrain.tools.launch import launch
from posttrain.tools.reward_check import check_reward
from tests.conftest import kill_leftover_runs, wait_finished

SEEN = """
import json
from pathlib import Path

def exact(completions, mood, **columns):
    with open(Path(__file__).with_name("seen.jsonl"), "a") as f:
        f.write(json.dumps(sorted({type(c).__name__ for c in completions})) + "\\n")
    return [1.0 if c.strip().lower().rstrip(".") == m else 0.0 for c, m in zip(completions, mood)]
"""


def test_a_chat_answer_is_its_text_and_an_episode_keeps_its_messages():
    assert answer_of([{"role": "assistant", "content": "calm"}]) == "calm"
    assert answer_of("calm") == "calm"
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]}
    episode = [call, {"role": "tool", "content": "42"}, {"role": "assistant", "content": "42"}]
    assert answer_of(episode) is episode
    assert answer_of([call]) == [call]


def test_in_an_environment_every_episode_reaches_the_reward_as_its_messages(tmp_path):
    """An episode where the model answered at once is one assistant message, like a chat
    answer; in an environment it still arrives as its messages, as every other episode does."""
    from posttrain.environments.episode_reward import EpisodeReward
    from posttrain.rewards.user import UserReward

    (tmp_path / "kinds.py").write_text(
        "def kinds(completions, **columns):\n"
        "    return [float(len(c)) for c in completions]  # messages, or characters\n"
    )
    inner = UserReward(ref=f"{tmp_path / 'kinds.py'}:kinds")
    at_once = [{"role": "assistant", "content": "42"}]
    called = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]},
        {"role": "tool", "content": "42"},
        {"role": "assistant", "content": "42"},
    ]
    scores = EpisodeReward(inner=inner).score([at_once, called])
    assert scores.rewards == [1.0, 3.0]  # 1 message, 3 messages
    assert inner.score([at_once]).rewards == [2.0]  # outside an environment: "42", its text


@pytest.mark.slow
def test_a_reward_written_for_text_is_checked_and_trained_with_text(home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    moods = ["joyful", "angry", "calm"]
    rows = [{"message": f"Message {i} from a customer.", "mood": moods[i % 3]} for i in range(48)]
    (tmp_path / "moods.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "label.py").write_text(SEEN)
    spec = {
        "model": "tiny-local",
        "dataset": {
            "path": str(tmp_path / "moods.jsonl"),
            "prompt_template": "Is this message joyful, angry or calm? {message}",
        },
        "reward": {"name": str(tmp_path / "label.py") + ":exact"},
        "algorithm": {
            "steps": 2,
            "lora": None,
            "batch_size": 8,
            "num_generations": 4,
            "max_completion_length": 8,
            "save_every": 0,
        },
    }
    checked = check_reward(spec=spec)
    assert checked.honest.mean == 1.0 and checked.flagged == []
    log = tmp_path / "seen.jsonl"
    assert {tuple(json.loads(line)) for line in log.read_text().splitlines()} == {("str",)}
    log.unlink()
    run_id = launch(spec, ctx=Context()).run_id
    try:
        detail = wait_finished(run_id, 300, Context())
    finally:
        kill_leftover_runs(home)
    assert detail.status == "succeeded", detail.cause
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(seen) >= 3  # the proof step's signal check, then each training step's batch
    assert {tuple(s) for s in seen} == {("str",)}  # text in training too, never a message list
