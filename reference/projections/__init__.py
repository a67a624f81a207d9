"""Projections, made to run: the registry of fold units with its cache (:mod:`.registry`), and
durability checkpoints (:mod:`.checkpoints`)."""
