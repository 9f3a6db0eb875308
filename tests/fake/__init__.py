"""Client tests against the in-process FakeCluster (no Java)."""
