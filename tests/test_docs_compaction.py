"""docs/compaction.md runs: its Python snippets, executed in order in one namespace, show a
compaction end to end and every assertion in them holds."""

from __future__ import annotations

import re
from pathlib import Path

from reference.session import Session

DOC = Path(__file__).resolve().parent.parent / "docs" / "compaction.md"


def python_snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_compaction_guide_has_runnable_snippets() -> None:
    assert len(python_snippets()) >= 3


def test_the_compaction_guide_runs_end_to_end() -> None:
    namespace: dict[str, object] = {"__name__": "docs_compaction"}
    for snippet in python_snippets():
        exec(compile(snippet, str(DOC), "exec"), namespace)
    session = namespace["session"]
    assert isinstance(session, Session) and len(session.surface.nodes) == 2
