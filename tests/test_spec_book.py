"""docs/SPEC.md, the spec book, is generated from spec/ and the vectors and kept fresh; every code
has the meaning the book shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spec.codes import MEANING, Code

ROOT = Path(__file__).resolve().parent.parent


def test_the_spec_book_is_fresh() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "spec_book.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr + "\n(regenerate with: python scripts/spec_book.py)"


def test_every_code_has_a_meaning() -> None:
    assert [code for code in Code if not MEANING.get(code)] == []


def test_the_book_names_every_code_it_can_raise_with_its_meaning() -> None:
    book = (ROOT / "docs" / "SPEC.md").read_text(encoding="utf-8")
    assert "`REPLACE_INVERTED`: " + MEANING[Code.REPLACE_INVERTED] in book
    assert "**Judged in a log by:** `surface-replace`" in book
