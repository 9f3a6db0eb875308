"""The pure TubeMQ protocol: frames, the RPC envelope, messages and client state machines.

Nothing in this package performs I/O, reads a clock or imports asyncio; time arrives as an
argument. A test enforces that rule.
"""
