"""Leases wing: the pure lease state machine, its Redis store and the Lua scripts that run it."""
