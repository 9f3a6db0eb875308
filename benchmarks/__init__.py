"""Benchmarks of tubemq-aio against the official Java and Go TubeMQ clients."""
