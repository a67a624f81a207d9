"""The README's Python examples run, and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_every_python_example_in_the_readme_runs_and_prints_its_documented_output() -> None:
    blocks = python_blocks()
    assert blocks, "the README shows the reference in Python"
    for block in blocks:
        expected = [line[len("# -> ") :] for line in block.splitlines() if line.startswith("# -> ")]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(README), "exec"), {})
        assert out.getvalue().splitlines() == expected
