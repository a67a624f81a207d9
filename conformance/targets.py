"""What a subject claims to implement, and how the suite's expectations follow that claim
(SPEC-DECISIONS D11; conformance/PROTOCOL.md, "hello").

A subject declares its *target* in ``hello``: the format version it writes (4, this project's; or
0, DSH 0.1's) and any named decisions. The suite's vectors and model speak format 4. For another
target the suite adjusts what it expects, never what it checks:

- **format 0** headers carry ``version: 0`` and no ``isSeeded`` (a v0 header cannot say it was
  seeded), and ``delegationDepth`` is optional (0 when absent); logs are named
  ``session.jsonl[.zstd]``;
- cases that are about the format 4 header itself (its validation, and reading a header line into
  a v4 header) do not apply to a format 0 writer and are reported *not run*, with that reason;
- a plain log handed to ``spec.framing.decode_jsonl_log`` whose first line is the suite's format 4
  header is handed over with that header in format 0 (the same line without ``isSeeded``, version
  0): framing and the stored lines' JSON do not depend on the header's format, and a format 0
  reader refuses a format 4 header before it frames anything. The expected header line is that
  format 0 line and the expected cut offset moves by the header's change in length. A zstd log's
  decompressed frames (``spec.framing.decode_compressed_log``, ``place_compressed_log``) are
  handed over the same way, the header line rewritten across the frames that hold it: the cut is
  a frame's file offset and does not move, each place's byte in the decompressed text does.

A subject judged by a target is judged by nothing it did not claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from spec.format.json_text import decode_json_text, encode_json_text
from spec.format.naming import V0_PLAIN_NAME, V0_ZSTD_NAME, V4_PLAIN_NAME, V4_ZSTD_NAME
from spec.log.header import HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION
from spec.log.json import JsonObject, JsonValue

FORMATS: Final = (HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION)
# Named SPEC-DECISIONS options a target may claim; none is defined yet, so any name is refused.
DECISIONS: Final[Mapping[str, str]] = {}
# Pure functions whose rule is the format 4 header's own: a format 0 writer has its own rules there.
FORMAT_4_FUNCTIONS: Final = frozenset({"spec.header.validate_header", "spec.storage.decode_header_line"})
STATE_OPS: Final = frozenset({"create", "fork", "state", "resume"})
# The pure function that reads a whole plain log, header line first.
FRAMED_LOG_FUNCTION: Final = "spec.framing.decode_jsonl_log"
# The pure functions that read a zstd log's decompressed frames, header line first.
FRAMES_FUNCTIONS: Final = frozenset(
    {"spec.framing.decode_compressed_log", "spec.framing.place_compressed_log"}
)
V0_NAMES: Final = {V4_ZSTD_NAME: V0_ZSTD_NAME, V4_PLAIN_NAME: V0_PLAIN_NAME}


class TargetError(ValueError):
    """A ``hello`` that claims a target the suite does not know."""


@dataclass(frozen=True)
class Target:
    """The format a subject writes and the decisions it claims."""

    format: int = HEADER_FORMAT_VERSION
    decisions: frozenset[str] = field(default_factory=frozenset)

    def describe(self) -> str:
        named = f", decisions {', '.join(sorted(self.decisions))}" if self.decisions else ""
        return f"format {self.format}{named}"

    def not_applicable(self, function: str | None) -> str | None:
        """Why a case that calls ``function`` does not apply to this target, or ``None``."""
        if self.format != HEADER_FORMAT_VERSION and function in FORMAT_4_FUNCTIONS:
            return f"{function} states the format 4 header's rule; the subject writes format {self.format}"
        return None

    def call_input(self, function: str, call: JsonObject) -> JsonObject:
        """The input of a ``call`` of ``function`` as this target is handed it: for a format 0
        target, :func:`spec.framing.decode_jsonl_log`'s text (or a zstd log's frames, joined) with
        its first line in format 0 when that line is a format 4 header as the suite writes it
        (compact JSON, ``\\n`` or ``\\r\\n`` ended); anything else unchanged."""
        return self._framed_log(function, call)[0]

    def pure_case(self, function: str, call: JsonObject, expect: JsonObject) -> tuple[JsonObject, JsonObject]:
        """A pure vector's input and expectation as this target is judged by them:
        :meth:`call_input`, and for a log whose header line it rewrote, the expected header line is
        the rewritten one, the expected cut offset of a plain log and each place's byte in a zstd
        log's decompressed text move by the line's change in length."""
        handed, header_line, shift = self._framed_log(function, call)
        found = expect.get("result")
        if header_line is None or not isinstance(found, dict):
            return handed, expect
        result = dict(found)
        if "headerLine" in result:
            result["headerLine"] = header_line
        cut = result.get("truncateTo")
        if function == FRAMED_LOG_FUNCTION and isinstance(cut, int) and not isinstance(cut, bool):
            result["truncateTo"] = cut + shift
        places = result.get("places")
        if isinstance(places, list):
            result["places"] = [_moved(place, shift) for place in places]
        if "tornPlace" in result:
            result["tornPlace"] = _moved(result["tornPlace"], shift)
        return handed, {**expect, "result": result}

    def _framed_log(self, function: str, call: JsonObject) -> tuple[JsonObject, JsonObject | None, int]:
        """:meth:`call_input`'s input, the rewritten header line (``None`` when nothing was
        rewritten) and how many bytes longer the text became."""
        if self.format == HEADER_FORMAT_VERSION:
            return call, None, 0
        if function in FRAMES_FUNCTIONS:
            return self._framed_frames(call)
        if function != FRAMED_LOG_FUNCTION:
            return call, None, 0
        text = call.get("text")
        rewritten = self._header_rewrite(text)
        if not isinstance(text, str) or rewritten is None:
            return call, None, 0
        old_end, new_line, header = rewritten
        shift = len(new_line.encode("utf-8")) - len(text[:old_end].encode("utf-8"))
        return {**call, "text": new_line + text[old_end:]}, header, shift

    def _framed_frames(self, call: JsonObject) -> tuple[JsonObject, JsonObject | None, int]:
        """:meth:`_framed_log` for a zstd log's frames (``frames``, then ``torn``): the header line
        rewritten in the frames' joined text, and each frame boundary inside it kept where the
        line is unchanged, moved with the text after the change."""
        frames, torn = call.get("frames"), call.get("torn")
        if not isinstance(frames, list):
            return call, None, 0
        units = [*frames, *([] if torn is None else [torn])]
        if not all(isinstance(unit, dict) and isinstance(unit.get("text"), str) for unit in units):
            return call, None, 0
        texts = [str(unit["text"]) for unit in units if isinstance(unit, dict)]
        joined = "".join(texts)
        rewritten = self._header_rewrite(joined)
        if rewritten is None:
            return call, None, 0
        old_end, new_line, header = rewritten
        same = next(
            (n for n, (a, b) in enumerate(zip(joined, new_line, strict=False)) if a != b),
            min(old_end, len(new_line)),
        )
        moved = len(new_line) - old_end
        text = new_line + joined[old_end:]
        bounds: list[int] = []
        start = 0
        for part in texts:
            start += len(part)
            bounds.append(start if start <= same else max(same, start + moved))
        parts = [text[begin:end] for begin, end in zip([0, *bounds[:-1]], bounds, strict=True)]
        handed: list[JsonValue] = [
            {**unit, "text": part} for unit, part in zip(units, parts, strict=True) if isinstance(unit, dict)
        ]
        shift = len(new_line.encode("utf-8")) - len(joined[:old_end].encode("utf-8"))
        result: JsonObject = {**call, "frames": handed[: len(frames)]}
        if torn is not None:
            result["torn"] = handed[-1]
        return result, header, shift

    def _header_rewrite(self, text: JsonValue) -> tuple[int, str, JsonObject] | None:
        """For a text whose first line is a format 4 header as the suite writes it (compact JSON,
        ``\n`` or ``\r\n`` ended): where that line's JSON ends, the line in this target's format
        and its header; ``None`` for any other text."""
        if not isinstance(text, str) or "\n" not in text:
            return None
        first = text.split("\n", 1)[0]
        line = first[:-1] if first.endswith("\r") else first
        try:
            header = decode_json_text(line)
        except ValueError:
            return None
        if not isinstance(header, dict) or header.get("version") != HEADER_FORMAT_VERSION:
            return None
        if encode_json_text(header) != line:
            return None
        rewritten: JsonObject = {key: value for key, value in header.items() if key != "isSeeded"}
        rewritten["version"] = self.format
        return len(line), encode_json_text(rewritten), rewritten

    def header(self, expected: JsonValue, actual: JsonValue) -> JsonValue:
        """The header this target expects where format 4 expects ``expected`` (``actual`` is what
        the subject showed: an absent ``delegationDepth`` is the default 0 only in format 0)."""
        if self.format == HEADER_FORMAT_VERSION or not isinstance(expected, dict):
            return expected
        view = {key: value for key, value in expected.items() if key != "isSeeded"}
        if "version" in view:
            view["version"] = self.format
        shown = actual if isinstance(actual, dict) else {}
        if view.get("delegationDepth") == 0 and "delegationDepth" not in shown:
            del view["delegationDepth"]
        return view

    def answer(
        self, op: str, expected: JsonValue, actual: JsonValue, function: str | None = None
    ) -> JsonValue:
        """The result this target expects for ``op`` where format 4 expects ``expected``."""
        if self.format == HEADER_FORMAT_VERSION:
            return expected
        if op in STATE_OPS or op == "read":
            return self._with_header(expected, actual)
        if op == "call" and function == "spec.storage.derive_session_relpath" and isinstance(expected, list):
            return [V0_NAMES.get(part, part) if isinstance(part, str) else part for part in expected]
        return expected

    def _with_header(self, expected: JsonValue, actual: JsonValue) -> JsonValue:
        if not isinstance(expected, dict) or "header" not in expected:
            return expected
        shown = actual.get("header") if isinstance(actual, dict) else None
        return {**expected, "header": self.header(expected["header"], shown)}


def _moved(place: JsonValue, shift: int) -> JsonValue:
    """A place ``{line, byte, frame}`` whose byte is ``shift`` bytes later; anything else as is."""
    byte = place.get("byte") if isinstance(place, dict) else None
    if not isinstance(place, dict) or not isinstance(byte, int) or isinstance(byte, bool):
        return place
    return {**place, "byte": byte + shift}


DEFAULT_TARGET: Final = Target()


def decode_target(hello: Mapping[str, JsonValue]) -> Target:
    """The target a ``hello`` result claims: protocol 1 subjects claim format 4; protocol 2
    subjects may name a ``target`` object ``{format, decisions}``. An unknown format or decision
    is a :class:`TargetError` that names the choices."""
    raw = hello.get("target")
    if raw is None:
        return DEFAULT_TARGET
    if not isinstance(raw, dict):
        raise TargetError(f"hello's target must be an object {{format, decisions}}, got {raw!r}")
    version = raw.get("format", HEADER_FORMAT_VERSION)
    if version not in FORMATS or isinstance(version, bool):
        raise TargetError(f"hello's target format {version!r} is not one the suite knows ({FORMATS})")
    decisions = raw.get("decisions", [])
    if not isinstance(decisions, list) or not all(isinstance(name, str) for name in decisions):
        raise TargetError("hello's target decisions must be an array of names")
    unknown = sorted({str(name) for name in decisions} - set(DECISIONS))
    if unknown:
        known = ", ".join(sorted(DECISIONS)) or "none are defined yet"
        raise TargetError(f"hello's target names unknown decisions {unknown} (known: {known})")
    return Target(int(version), frozenset(str(name) for name in decisions))
