"""Reward functions, their guards, and the probe battery that hunts for exploits.

from posttrain.rewards import get_reward
reward = get_reward("rhyme_relevance")
reward.score(completions, reference=references)  # Scores: rewards + components
"""

from posttrain.rewards.base import Reward, Scores
from posttrain.rewards.guards import Guarded, checked_scores
from posttrain.rewards.registry import REWARDS, get_reward

__all__ = ["REWARDS", "Guarded", "Reward", "Scores", "checked_scores", "get_reward"]
