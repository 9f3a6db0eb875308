"""The package version: a leaf every layer may import (the build reads it from here too)."""

__version__ = "0.3.0.dev0"
