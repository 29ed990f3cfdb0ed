"""An LLM judge as a reward (issue 38, in progress): the request a judge is sent and how its
answer is read (protocol.py), and the cache that makes a repeated completion free (cache.py).
The HTTP client, the `judge` reward, its probes and its price are not built yet."""
