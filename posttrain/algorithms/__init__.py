"""One unit per algorithm kind and their registry (posttrain.algorithms.kinds)."""
