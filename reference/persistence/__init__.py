"""Persistence backends behind one interface (SPEC-DECISIONS D2): in-memory and the file store."""
