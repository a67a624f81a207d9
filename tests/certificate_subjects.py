"""Subjects that support little or nothing, for the tests of what a certificate may claim
(tests/test_certificate.py).

- :class:`NothingSubject` answers ``hello``, ``reset`` and ``clock`` and ``UNSUPPORTED_OP`` to
  everything else: it implements nothing, so nothing may be certified.
- :class:`ThirdSubject` is the reference declaring only ``core`` and refusing every op but a
  third of the core ones (``create``, ``state``, ``read``, ``close``): no family that needs the
  rest may pass.

Run as a script (``python tests/certificate_subjects.py nothing``) either speaks the protocol over
stdio, one JSON request per line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: the repository first

from reference.server import ReferenceSubject

HARNESS_OPS: Final = frozenset({"hello", "reset", "clock"})


def answer(request: dict[str, Any], result: Any) -> dict[str, Any]:
    return {"rid": request.get("rid"), "ok": True, "result": result}


def refuse(request: dict[str, Any]) -> dict[str, Any]:
    message = f"{request.get('op')} is not implemented"
    return {"rid": request.get("rid"), "ok": False, "error": {"code": "UNSUPPORTED_OP", "message": message}}


class NothingSubject:
    """hello, reset and clock; UNSUPPORTED_OP for everything else."""

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "hello":
            hello = {"protocol": 2, "name": "nothing", "version": "0", "capabilities": ["core"]}
            return answer(request, hello | {"target": {"format": 4, "decisions": []}})
        if op == "reset":
            return answer(request, None)
        if op == "clock":
            return answer(request, request.get("now"))
        return refuse(request)


class ThirdSubject:
    """The reference, declaring only core, with every op but create, state, read and close refused."""

    KEPT: Final = HARNESS_OPS | {"create", "state", "read", "close"}

    def __init__(self) -> None:
        self.reference = ReferenceSubject()

    def handle(self, request: dict[str, Any]) -> Any:
        if request.get("op") not in self.KEPT:
            return refuse(request)
        response = self.reference.handle(request)
        if request.get("op") == "hello" and isinstance(response, dict) and response.get("ok"):
            response["result"] = response["result"] | {"capabilities": ["core"]}
        return response


class RefusesFlush:
    """The reference with every capability, refusing ``flush``: the files family's workload can
    never run to its end."""

    def __init__(self) -> None:
        self.reference = ReferenceSubject()

    def handle(self, request: dict[str, Any]) -> Any:
        return refuse(request) if request.get("op") == "flush" else self.reference.handle(request)


if __name__ == "__main__":
    subject = {"nothing": NothingSubject, "third": ThirdSubject}[sys.argv[1]]()
    for line in sys.stdin:
        print(json.dumps(subject.handle(json.loads(line))), flush=True)
