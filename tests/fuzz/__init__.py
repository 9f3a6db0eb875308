"""Seeded fuzzing of the decoders and parsers (a short run of tubemq_aio.testing.fuzz)."""
