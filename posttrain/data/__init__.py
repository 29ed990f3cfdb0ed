"""The rows a run trains on: a spec's dataset loaded and checked, tool calls in their one
canonical form, the built-in generators (the rhyme gym, the tool-calling gym) and the demo's
data."""
