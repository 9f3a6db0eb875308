"""Unit tests of the HTTP gateway against fakes (no Redis, no TubeMQ)."""
