"""Unit tests: no sockets to real servers, no cluster, no Java."""
