"""posttrain: LLM post-training as tools for AI agents."""

__version__ = "0.1.0"
