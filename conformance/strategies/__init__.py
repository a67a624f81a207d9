"""The value domain the suite draws from: the edges of D5's lossless JSON and of JSON text, as
constants and as Hypothesis strategies (SPEC-DECISIONS D5; issue 10).

A port to another language slips where its own types differ from JavaScript's, so every
generated workload draws its texts, numbers, content blocks and optional keys from here: the
``pure-drt`` family (:mod:`conformance.pure_drt`), the machine (:mod:`conformance.machine.variants`),
the exhaustive checker's alphabet and the crash workloads; the vector cases use the constants.
The edges, one kind per group:

- **code points versus UTF-16**: a character outside the Basic Multilingual Plane is one code
  point and two UTF-16 code units (:data:`NON_BMP`);
- **lone surrogates**, which JSON text carries as ``\\ud800`` escapes and UTF-8 cannot
  (:data:`LONE_SURROGATES`);
- **characters some line splitters end a line at** (Python's ``str.splitlines``, JavaScript's
  ``/^/m``), while JSONL ends a line only at ``\\n``: U+2028, U+2029 and U+0085 appear raw inside
  JSON strings, ``\\r``, ``\\x0b`` and ``\\x0c`` only escaped (:data:`LINE_BREAKERS`);
- **integer-valued floats** where an integer is expected: ``1.0`` is the integer 1 (D5);
- **the safe-integer bound**: ``2**53 - 1`` and its negative are safe, ``2**53`` is not (as JSON
  text it is a double, not a safe integer);
- **booleans where numbers are expected**: ``true`` is not ``1``;
- **content arrays with several blocks**, and block types no rule knows;
- **optional keys absent versus null**: an absent key is JavaScript's ``undefined``, ``null`` is a
  value the rules judge.
"""

from __future__ import annotations

from conformance.strategies.domain import (
    EDGE_TEXTS,
    IMAGE_BLOCK,
    LINE_BREAKERS,
    LONE_SURROGATES,
    NON_BMP,
    NOT_NUMBERS,
    NUMBER_EDGES,
    SAFE_BOUND,
    UNKNOWN_BLOCK,
    UNSAFE_INTEGER,
    WORKLOAD_TEXTS,
    content_blocks,
    identifiers,
    json_scalars,
    json_values,
    mostly,
    numbers,
    pruned_text_blocks,
    safe_integers,
    seq_like,
    sized_text,
    text_block,
    texts,
    with_optional,
)
from conformance.strategies.events import (
    MODEL_SOURCE,
    logs,
    surface_nodes,
    tool_result_data,
)

__all__ = [
    "EDGE_TEXTS",
    "IMAGE_BLOCK",
    "LINE_BREAKERS",
    "LONE_SURROGATES",
    "MODEL_SOURCE",
    "NON_BMP",
    "NOT_NUMBERS",
    "NUMBER_EDGES",
    "SAFE_BOUND",
    "UNKNOWN_BLOCK",
    "UNSAFE_INTEGER",
    "WORKLOAD_TEXTS",
    "content_blocks",
    "identifiers",
    "json_scalars",
    "json_values",
    "logs",
    "mostly",
    "numbers",
    "pruned_text_blocks",
    "safe_integers",
    "seq_like",
    "sized_text",
    "surface_nodes",
    "text_block",
    "texts",
    "tool_result_data",
    "with_optional",
]
