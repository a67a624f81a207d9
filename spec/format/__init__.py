"""The stored form: JSON text, where a log lives and what its first line says, how its bytes are
framed, and how DSH's v0 records are read (SPEC-DECISIONS D1, D3, D5)."""
