"""Benchmarks that drive the engine from outside it: the held-out prompt suite and its summary."""
