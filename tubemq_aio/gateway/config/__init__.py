"""Configuration wing: the TOML file and environment read once into frozen dataclasses."""
