"""Developer scripts (run as modules from the repository root, e.g. ``python -m scripts.autogen``)."""
