"""``make bench-gateway``: the HTTP gateway against the framework floor and the SDK itself."""
