"""Projections as pure folds of the log with their cache rows (SPEC-DECISIONS D7), and the moments
a log must be durable."""
