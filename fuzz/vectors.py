"""The conformance command's vector loading, :func:`conformance.runner.load_vectors`, on a vector
file holding the fuzzer's bytes.

Oracle, for any bytes ``data``: loading returns one vector (a dict with a string ``name``, a
``family`` and a list of ``steps`` or a string ``function``) or raises the loader's typed
:class:`conformance.runner.VectorFileError` (code ``VECTOR_MALFORMED``); nothing else.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from conformance.runner import VectorFileError, load_vectors
from fuzz import Finding


def one_input(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-vectors-") as root:
        (Path(root) / "family").mkdir()
        (Path(root) / "family" / "vector.json").write_bytes(data)
        try:
            vectors = load_vectors(Path(root))
        except VectorFileError as error:
            if error.code != "VECTOR_MALFORMED":
                raise Finding(f"a vector error without its code: {error!r}") from None
            return
    if len(vectors) != 1:
        raise Finding(f"one file gave {len(vectors)} vectors")
    vector = vectors[0]
    if not isinstance(vector.get("name"), str) or not isinstance(vector.get("family"), str):
        raise Finding(f"a vector without a name or a family: {vector!r}")
    if not (isinstance(vector.get("steps"), list) or isinstance(vector.get("function"), str)):
        raise Finding(f"a vector with neither steps nor a function: {vector!r}")
