"""The soak run (``make soak``), a script rather than a pytest test."""
