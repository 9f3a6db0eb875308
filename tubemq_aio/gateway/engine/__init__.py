"""Engine wing: the consume service, one fetch attempt, TubeMQ sessions, dead letters, tokens."""
