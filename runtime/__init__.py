"""The runtime layer: where and when the graph runs (backends, executor, evaluate)."""
