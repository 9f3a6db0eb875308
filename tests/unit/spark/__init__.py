"""Unit tests of the PySpark source and sink (no Spark session, no cluster)."""
