"""The fault suite: the fake cluster behind fault proxies (no Java)."""
