import pickle
import textwrap

import pytest

from posttrain.core.errors import ConfigError, RewardError
from posttrain.rewards.guards import checked_scores
from posttrain.rewards.registry import get_reward


def write(tmp_path, body: str, name: str = "my_reward.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_a_user_file_reward_scores_with_trl_signature_and_columns(tmp_path, monkeypatch):
    write(
        tmp_path,
        """
        def length_match(completions, reference, scale=1.0, **kwargs):
            return [scale * float(len(c) == len(r)) for c, r in zip(completions, reference)]
        """,
    )
    monkeypatch.chdir(tmp_path)
    reward = get_reward("my_reward.py:length_match", {"scale": 0.5})
    assert reward.columns == ("reference",)
    assert reward(["abc", "de"], reference=["xyz", "xyz"]) == [0.5, 0.0]


def test_a_user_reward_pickles_by_reference(tmp_path):
    path = write(tmp_path, "def one(completions, **kw):\n    return [1.0] * len(completions)\n")
    reward = get_reward(f"{path}:one")
    clone = pickle.loads(pickle.dumps(reward))
    assert clone(["a", "b"]) == [1.0, 1.0]


def test_a_module_reward_loads_by_import():
    reward = get_reward("posttrain.rewards.relevance:token_f1")
    assert reward.ref.endswith(":token_f1")


@pytest.mark.parametrize(
    ("body", "ref_func", "message"),
    [
        ("def f(completions):\n    return []\n", "nope", "has no function 'nope'; it defines: f"),
        ("def f(completions:\n", "f", r"line 1: SyntaxError"),
        ("import not_a_real_module_xyz\n", "f", r"raised ModuleNotFoundError while loading"),
        ("def f(texts):\n    return []\n", "f", "must take a 'completions' argument"),
        ("f = 3\n", "f", "'f' is a int, not a function"),
    ],
)
def test_load_errors_name_the_file_and_the_problem(tmp_path, body, ref_func, message):
    path = write(tmp_path, body)
    reward = get_reward(f"{path}:{ref_func}")
    with pytest.raises(RewardError, match=message) as info:
        reward(["x"])
    assert str(path) in str(info.value)


def test_a_missing_file_says_where_it_looked(tmp_path):
    with pytest.raises(RewardError, match=r"does not exist .looked for"):
        get_reward(f"{tmp_path}/absent.py:f")(["x"])


def test_an_unknown_reward_name_lists_the_built_ins():
    with pytest.raises(ConfigError, match=r"unknown reward 'rhymes'.*rhyme_relevance"):
        get_reward("rhymes")


def test_guards_check_what_a_user_reward_returns(tmp_path):
    path = write(tmp_path, "def f(completions, **kw):\n    return [0.5, float('nan')]\n")
    with pytest.raises(RewardError, match=r"returned nan for example 1 \(completion 'second'\)"):
        checked_scores(get_reward(f"{path}:f"), ["first", "second"])
