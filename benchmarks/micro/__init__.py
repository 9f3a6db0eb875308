"""Micro benchmarks of client-side building blocks (transport, codec) run in isolation."""
