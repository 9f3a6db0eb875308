"""Tests on real loopback sockets and real local servers (an echo server, redis-server,
uvicorn); no TubeMQ, no Java."""
