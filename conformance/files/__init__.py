"""The ``files`` family: the bytes a storage subject writes, read by the specification's own reader
(SPEC-DECISIONS D1, D2, D3, D5; issue 10).

- **Reading** — :mod:`conformance.cases.files` writes reference files (v4 plain and compressed,
  torn tails at several cuts, damaged middles, DSH's v0 logs with chunk rows and messages from
  before message identity) to ``conformance/reference-files/`` and vectors for them to
  ``conformance/vectors/files/``: each vector places its files with ``reset``'s ``files`` argument
  (capability ``import``) and says what ``read`` and ``resume`` must answer.
- **Writing** — :mod:`conformance.files.writing` runs a workload on the subject, takes the files it
  wrote (the ``export`` op, or for a stdio subject without it the kill check's store root) and
  checks the layout and file names, the header line, the framing (one zstd frame per flush; the
  file readable by the standard ``zstd -dc``), every line under D5, and the whole log by the
  checker.

:mod:`conformance.files.reader` is the spec's reader over such a set of files; the model uses it
to know what a placed file holds. The runner's entry point is
:func:`conformance.files.writing.check_files`.
"""
