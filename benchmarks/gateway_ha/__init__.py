"""``make gateway-ha-run``: the gateway under load while a replica and the Redis primary die."""
