"""Coverage-guided fuzz harnesses (issue 23 item 4), on atheris, libFuzzer for Python.

Not part of the installed packages: a folder of small modules, one per target, each with
``one_input(data: bytes) -> None`` that runs its target on the fuzzer's bytes and raises
:class:`Finding` (or lets an unexpected exception through) when the oracle stated in its module
docstring is broken. Every oracle also holds the time per input to libFuzzer's ``-timeout``.

``python -m fuzz TARGET [libFuzzer flags] [CORPUS_DIR...]`` fuzzes one target;
``scripts/fuzz.sh TARGET SECONDS`` does so on a copy of the seed corpus (``fuzz/corpus/TARGET``);
``tests/test_fuzz.py`` replays each seed and each regression input (``fuzz/regressions/TARGET``)
through the oracle in-process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

TARGETS: Final[Mapping[str, tuple[str, ...]]] = {
    "json_text": (),
    "lines": (),
    "legacy": (),
    "zstd": (),
    "check_log": (),
    "server": (),
    "vectors": (
        "conformance.families",
        "conformance.matching",
        "conformance.progress",
        "conformance.report",
        "conformance.subject",
        "conformance.targets",
    ),
}
"""The harnesses, by module name under :mod:`fuzz`, each with the modules imported *before*
atheris instruments the rest of the project: code libFuzzer need not see, whose instrumentation
would cost seconds of start-up per run (the vector loader needs only ``conformance.runner``)."""


# This module imports nothing of the project: ``python -m fuzz`` imports it before instrumenting.


class Finding(AssertionError):
    """An oracle broken: the input's answer is not one the harness's oracle allows."""
