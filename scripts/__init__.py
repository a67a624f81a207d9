"""The project's tools, run as modules from the repository root: ``python -m scripts.NAME``."""
