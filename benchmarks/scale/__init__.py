"""The scale benchmark: a client's cost against partitions, members and topics
(``make bench-scale``)."""
