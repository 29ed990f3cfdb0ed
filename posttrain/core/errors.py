"""The project's exceptions: one base, each subclass also the standard exception it replaces.

Every message names what is wrong and how to fix it, so an agent reading it can act on it.
"""

from __future__ import annotations


class PosttrainError(Exception):
    """Base of every error posttrain raises on purpose."""


class ConfigError(PosttrainError, ValueError):
    """A spec, parameter or setting is invalid; the message names the field and the fix."""


class RewardError(PosttrainError, ValueError):
    """A reward could not be loaded, raised, or returned values it must not return."""


class NotFoundError(PosttrainError, LookupError):
    """A run, file or name does not exist."""


class BackendError(PosttrainError):
    """A backend could not do what was asked: not configured, not deployed, unreachable, or
    its storage is full or read-only."""


class BudgetError(PosttrainError):
    """A launch refused by the budget policy, or a confirmation token that is not valid."""
