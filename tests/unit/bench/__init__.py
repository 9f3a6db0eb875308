"""Unit tests of the benchmark harness (``benchmarks``)."""
