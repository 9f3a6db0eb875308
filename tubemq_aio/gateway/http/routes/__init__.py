"""The gateway's HTTP routes, one module per area."""
