"""``python -m fuzz TARGET [libFuzzer flags] [CORPUS_DIR...]``: fuzz one harness with atheris.

The project's packages are imported under atheris's instrumentation so that libFuzzer sees their
branches (but for the modules :data:`fuzz.TARGETS` names for the target, imported before); the flags after TARGET go to libFuzzer unchanged."""

from __future__ import annotations

import importlib
import sys

from fuzz import TARGETS


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in TARGETS:
        print(f"usage: python -m fuzz TARGET [libFuzzer flags]; TARGET is one of {', '.join(TARGETS)}")
        return 2
    import atheris

    for module in TARGETS[argv[1]]:
        importlib.import_module(module)
    with atheris.instrument_imports(include=["spec", "reference", "conformance", "fuzz"]):
        harness = importlib.import_module(f"fuzz.{argv[1]}")
    atheris.Setup([argv[0], *argv[2:]], harness.one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
