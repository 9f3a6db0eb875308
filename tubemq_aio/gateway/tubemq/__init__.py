"""TubeMQ wing: the gateway's sessions with the cluster (shared consumer id), reads, probes."""
