"""Benchmark peers: small programs driving the official Java and Go TubeMQ clients."""
