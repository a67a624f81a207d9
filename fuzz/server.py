"""The protocol server's request handling: :func:`reference.server.serve` around a fresh
:class:`reference.server.ReferenceSubject` (the simulated filesystem: nothing touches the disk),
fed the fuzzer's bytes as request lines (invalid UTF-8 replaced, as a text stream would not).

Oracle, for any bytes ``data``: ``serve`` returns (it never raises); it writes exactly one line
per non-blank request line, each a JSON object with ``rid`` and a boolean ``ok``; a refusal has a
string ``code``, and that code is never ``INTERNAL`` — an ``INTERNAL`` answer means the handling
raised something other than the typed errors the subject maps to codes.
"""

from __future__ import annotations

from fuzz import Finding
from reference.server import ReferenceSubject, serve
from spec.format.json_text import decode_json_text
from spec.protocol import INTERNAL


def one_input(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    lines = iter(text.splitlines(keepends=True))
    written: list[str] = []
    serve(ReferenceSubject(), lambda: next(lines, ""), written.append)
    expected = sum(1 for line in text.splitlines() if line.strip())
    if len(written) != expected:
        raise Finding(f"{expected} requests got {len(written)} answers: {data!r}")
    for answer_text in written:
        answer = decode_json_text(answer_text)
        if not isinstance(answer, dict) or "rid" not in answer or not isinstance(answer.get("ok"), bool):
            raise Finding(f"an answer that is not a response: {answer_text!r}")
        if answer["ok"] is False and answer.get("code") == INTERNAL:
            raise Finding(f"the handling raised: {answer_text.strip()} for {data!r}")
