"""Housekeeper wing: per-group background jobs run by one elected replica per group."""
