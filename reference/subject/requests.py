"""What every op shares: its arguments (:class:`Args`), the protocol's own refusals (not rule
rejections, so not in :mod:`spec.codes`) and the shape of an error answer (conformance/PROTOCOL.md)."""

from __future__ import annotations

from collections.abc import Mapping

from spec.log.json import JsonValue, is_safe_integer
from spec.log.session import ABSENT


class BadRequest(Exception):
    """The request is malformed in a way no rule judges (answered ``BAD_REQUEST``)."""


class UnsupportedOp(Exception):
    """The op or pure function is not implemented (answered ``UNSUPPORTED_OP``)."""


class Args:
    """An op's arguments: the request without ``rid`` and ``op``. A key that is absent stays
    distinct from ``null`` (:data:`spec.session.ABSENT`)."""

    def __init__(self, values: Mapping[str, JsonValue]) -> None:
        self._values = values

    def optional(self, key: str) -> object:
        """The value, or ``ABSENT`` when the key was not passed."""
        return self._values.get(key, ABSENT)

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        return self._values.get(key, default)

    def session_id(self, key: str = "id") -> str:
        value = self._values.get(key)
        if not isinstance(value, str):
            raise BadRequest(f"{key!r} must be a session id string")
        return value

    def optional_session_id(self, key: str) -> str | None:
        """A session id, where absent and ``null`` both mean "mint one"."""
        if self._values.get(key) is None:
            return None
        return self.session_id(key)

    def count(self, key: str, default: int | None = None) -> int:
        """A non-negative integer argument (``default`` when absent)."""
        value = self._values.get(key, default)
        if not is_safe_integer(value) or value < 0:
            raise BadRequest(f"{key!r} must be a non-negative integer")
        return int(value)


def error_response(rid: JsonValue, code: str, message: str) -> dict[str, JsonValue]:
    """A refused request's answer."""
    return {"rid": rid, "ok": False, "error": {"code": code, "message": message}}
