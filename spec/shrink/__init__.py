"""Shrinking the context, ordered by cost: tool pairing and token prices, then spill, pruning and
summary compaction with its bracket, pressure and overflow recovery (SPEC-DECISIONS D8)."""
