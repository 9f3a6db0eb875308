"""Chaos run on a real multi-master, multi-broker cluster (``make chaos``; docs/failures.md).

Producers (one on asyncio, one on uvloop), a server-balanced group of two consumers and a
client-balanced consumer run throughout while the run kills the active master, restarts every
broker one at a time, freezes a broker, cuts the network to one broker and restarts all brokers
at once. Per event it reports acknowledged-but-never-consumed messages, duplicates, the typed
errors the application saw and how long produce and consume stalled.
"""
