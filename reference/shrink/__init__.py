"""Shrinking the context, made to run: the compaction engine (prune, summary, overflow recovery)
and spill stores."""
