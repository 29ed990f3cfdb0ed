"""An LLM judge as a reward: the request a judge is sent and how its answer is read
(protocol.py), the cache that makes a repeated completion free (cache.py), the HTTP client
(client.py) and the `judge` reward itself (reward.py). docs/judge.md writes the protocol down."""
