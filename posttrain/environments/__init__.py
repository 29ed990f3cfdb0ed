"""Environments: multi-turn episodes in which the model calls tools (TRL 1.16's contract).

An environment is a class; TRL builds one instance per rollout (no constructor arguments),
calls `reset(**row)` with the dataset row (a string it returns is appended to the last user
turn), offers every public method but `reset` and `get_reward` to the model as a tool (typed
arguments and a Google-style docstring become its JSON schema), and, when the class defines
`get_reward()`, scores the finished episode with it. Plain functions can serve as tools too.

Layout: `refs` names environments in a spec (no user code runs there); `loader`, `episode`
and `scenarios` run inside the isolated child (`child`), never in the server.
"""
