"""The `judge` reward against a real HTTP judge (tests/rewards/judge_server.py, its own process):
groups of one prompt's completions in one request, a gate that spares the judge, a repeated
completion from the cache, an unreadable verdict scored None and allowed by the guards for a
judge alone, a rubric file read into the spec, and an endpoint that is down failing by name."""

import json

import pytest

from posttrain.core.errors import ConfigError, RewardError
from posttrain.rewards.guards import checked_scores
from posttrain.rewards.judge.client import JudgeUnavailable
from posttrain.rewards.registry import get_reward
from posttrain.spec.schema import load_spec
from tests.conftest import free_port
from tests.rewards.judge_server import serving

RUBRIC = "You grade arithmetic: the right final number scores 1, anything else 0."


@pytest.fixture
def judge(tmp_path, home):
    log = tmp_path / "requests.jsonl"
    with serving(log) as url:
        yield url, log


def requests(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def params(url, **more):
    return {"rubric": RUBRIC, "base_url": url, "model": "rule-judge", **more}


def test_group_mode_asks_once_a_prompt_and_scores_each_completion(judge):
    url, log = judge
    reward = get_reward("judge", params(url))
    prompts = ["What is 2 + 3?"] * 3 + ["What is 7 * 6?"] * 3
    completions = ["5", "six", "It is 5.", "42", "41", ""]
    scores = checked_scores(reward, completions, prompts=prompts)
    assert scores.rewards == [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    assert scores.reasons[1] == "expected 5"
    seen = requests(log)
    assert len(seen) == 2  # one request a prompt, all its answers in it
    assert seen[0]["messages"][0] == {"role": "system", "content": RUBRIC}
    assert seen[0]["messages"][1]["content"].count("<answer id=") == 3
    assert reward.usage()["requests"] == 2 and reward.usage()["judged"] == 6


def test_single_mode_asks_once_an_answer_and_a_repeat_comes_from_the_cache(judge):
    url, log = judge
    reward = get_reward("judge", params(url, mode="single"))
    prompts = ["What is 10 - 4?"] * 2
    first = checked_scores(reward, ["6", "4"], prompts=prompts)
    again = checked_scores(reward, ["6", "4"], prompts=prompts)
    assert first.rewards == again.rewards == [1.0, 0.0]
    assert len(requests(log)) == 2  # the second batch cost nothing
    assert reward.usage()["cache_hits"] == 2


def test_a_gate_multiplies_the_judge_and_spares_it_where_it_is_zero(judge, tmp_path):
    url, log = judge
    gate = tmp_path / "gate.py"
    gate.write_text(
        "def short(completions, **kw):\n"
        "    return [1.0 if len(c) < 20 else 0.0 for c in completions]\n"
    )
    reward = get_reward(
        "judge", params(url, gate={"name": f"{gate}:short", "params": {"value_range": [0, 1]}})
    )
    assert reward.components == ("judge", "gate")
    scores = checked_scores(
        reward, ["8", "8 " + "because " * 10, "9"], prompts=["What is 4 + 4?"] * 3
    )
    assert scores.rewards == [1.0, 0.0, 0.0]
    assert scores.components["gate"] == [1.0, 0.0, 1.0]
    assert scores.components["judge"] == [1.0, None, 0.0]  # the long one was never shown
    assert requests(log)[0]["messages"][1]["content"].count("<answer id=") == 2


def test_a_reference_column_is_shown_to_the_judge(judge):
    url, log = judge
    reward = get_reward("judge", params(url, reference_column="label"))
    assert reward.columns == ("label",)
    scores = checked_scores(
        reward,
        ["It is spam.", "Looks fine to me"],
        prompts=["Label this email: WIN A PRIZE"] * 2,
        label=["spam", "spam"],
    )
    assert scores.rewards == [1.0, 0.0]
    assert "Reference answer:\nspam" in requests(log)[0]["messages"][1]["content"]


def test_an_ungradable_answer_is_none_for_a_judge_and_an_error_for_any_other_reward(home):
    from posttrain.rewards.base import Reward, Scores

    class Unsure(Reward):
        judged = True

        def score(self, completions, **columns):
            return Scores(rewards=[None for _ in completions])

    assert checked_scores(Unsure(), ["x"]).rewards == [None]
    Unsure.judged = False
    with pytest.raises(RewardError, match="None"):
        checked_scores(Unsure(), ["x"])


def test_an_endpoint_that_is_down_fails_by_name_and_never_scores(home):
    url = f"http://127.0.0.1:{free_port()}/v1"
    reward = get_reward("judge", params(url, retries=1))
    with pytest.raises(JudgeUnavailable, match=f"judge at {url}"):
        reward.ready()
    with pytest.raises(RewardError, match=f"judge at {url} did not answer"):
        checked_scores(reward, ["5"], prompts=["What is 2 + 3?"])


def test_a_rubric_file_is_read_into_the_spec_inside_the_roots(tmp_path):
    rubric = tmp_path / "rubric.md"
    rubric.write_text("Grade helpfulness — précisément.", encoding="utf-8")
    spec = {
        "dataset": {"builtin": "rhyme-gym"},
        "reward": {
            "name": "judge",
            "params": {
                "rubric_file": str(rubric),
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
            },
        },
    }
    loaded = load_spec(spec, roots=[tmp_path])
    assert loaded.reward.params["rubric"] == "Grade helpfulness — précisément."
    assert "rubric_file" not in loaded.reward.params
    with pytest.raises(ConfigError, match="rubric file"):
        load_spec(spec, roots=[tmp_path / "elsewhere"])


def test_the_specs_eval_judge_is_checked_at_load_its_rubric_file_read_inside_the_roots(tmp_path):
    rubric = tmp_path / "second.md"
    rubric.write_text("Is it correct? Réponds en JSON.", encoding="utf-8")
    judge = {"rubric_file": str(rubric), "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    spec = {"dataset": {"builtin": "rhyme-gym"}, "eval": {"judge": judge}}
    loaded = load_spec(spec, roots=[tmp_path])
    assert loaded.eval.judge == {
        "rubric": "Is it correct? Réponds en JSON.",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "mode": "single",  # scored alone: group scores of two arms cannot be compared
    }
    with pytest.raises(ConfigError, match=r"eval\.judge.*rubric file"):
        load_spec(spec, roots=[tmp_path / "elsewhere"])
    grouped = {"eval": {"judge": {**judge, "mode": "group"}}}
    with pytest.raises(ConfigError, match=r"'eval\.judge'.*mode must be 'single'"):
        load_spec(grouped, roots=[tmp_path])
    with pytest.raises(ConfigError, match=r"'eval\.judge'.*needs params \['base_url'"):
        load_spec({"eval": {"judge": {"rubric": "x"}}})


def test_criteria_render_as_a_weighted_rubric_with_a_reason_before_each_verdict():
    reward = get_reward(
        "judge",
        {
            "rubric": [
                {"name": "correct", "description": "The number is right.", "weight": 2},
                {"name": "brief", "description": "One line."},
            ],
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
        },
    )
    assert "reason briefly before its verdict" in reward.rubric_text
    assert "- correct [weight 2]: The number is right." in reward.rubric_text
    with pytest.raises(ConfigError, match="base_url"):
        get_reward("judge", {"rubric": "r", "model": "m"})


def test_a_judge_off_this_machine_with_no_price_it_can_state_is_refused():
    remote = {"rubric": "r", "base_url": "https://api.example.com/v1", "model": "m"}
    with pytest.raises(ConfigError, match="no price is known for model 'm'"):
        get_reward("judge", remote)
    priced = get_reward("judge", {**remote, "price_per_mtok": [2.5, 10]})
    assert not priced.free
    own = get_reward("judge", {**remote, "price_per_mtok": [0, 0]})  # the user's free server
    assert own.free
    assert get_reward("judge", {**remote, "base_url": "http://localhost:8011/v1"}).free


def test_plan_of_a_modal_spec_with_a_paid_judge_shows_the_judges_share(home):
    from posttrain.tools.plan import plan

    judge = {"rubric": "r" * 400, "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini"}
    spec = {
        "model": "Qwen3-0.6B",
        "dataset": {"builtin": "rhyme-gym"},
        "reward": {"name": "judge", "params": judge},
        "algorithm": {"steps": 100, "batch_size": 64, "num_generations": 8},
        "compute": {"backend": "modal", "gpu": "H100", "timeout_s": 3600},
    }
    planned = plan(spec)
    share = planned.cost.judge
    assert share["calls"] == 100 * 8  # group mode: a call a prompt a step
    assert list(share["usd_per_mtok"]) == [0.15, 0.60] and "table" in share["price_source"]
    # 800 calls x (100 rubric + 512 prompt + 8 x 256 answers + 120) tokens in, 512 out
    assert share["tokens_in"] == 800 * (100 + 512 + 8 * 256 + 120)
    expected = (share["tokens_in"] * 0.15 + share["tokens_out"] * 0.60) / 1e6
    assert share["expected_usd"] == round(expected, 2)
    gpu_only = plan({**spec, "reward": "rhyme"}).cost
    assert planned.cost.worst_case_usd == round(
        gpu_only.worst_case_usd + share["worst_case_usd"], 2
    )  # the approval covers both
    assert "of which the judge (gpt-4o-mini" in planned.cost.summary
    unknown = {**judge, "model": "my-fine-tune"}
    with pytest.raises(ConfigError, match="price_per_mtok"):
        plan({**spec, "reward": {"name": "judge", "params": unknown}})
    local = {**judge, "base_url": "http://127.0.0.1:8011/v1"}
    here = plan({**spec, "reward": {"name": "judge", "params": local}})
    assert here.cost.judge is None  # free, and out of Modal's reach: launch would refuse it
    assert any("cannot reach" in w and w.startswith("launch would answer") for w in here.warnings)


def test_check_reward_and_evaluate_refuse_a_paid_judge_they_cannot_price():
    reward = get_reward(
        "judge", {"rubric": "r", "base_url": "https://api.openai.com/v1", "model": "gpt-4o"}
    )
    with pytest.raises(ConfigError, match="check_reward would call the paid judge"):
        reward.refuse_unpriced("check_reward")
