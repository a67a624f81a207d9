"""The reference implementation: the specification made to run (sessions and their store, the
persistence backends, the compaction engine, projections, the CLI and the protocol server)."""
