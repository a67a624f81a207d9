"""More deliberately broken subjects (issue 10): the bugs a port to another language ships where its
own types differ from JavaScript's, and where it writes the stored form by hand.

Each is the reference with one helper swapped for a plausible wrong one for the length of every
request (:class:`SwapMutant`), or one file-store method overridden. A helper swapped
*everywhere* is replaced in every ``spec``/``reference`` module that imported it, as a port's one
shared helper would be wrong everywhere it is used; the suite's own oracle never runs while a
request is being handled, so it keeps the right one. The kinds, as issue 10 names them:
value-domain slips (integral floats, the safe-integer bound, booleans as numbers), a line
splitter that is too eager, UTF-16 units versus code points, multi-block content and unknown
block types, absent versus null, storage layout and framing. ``BROKEN_VALUES`` lists them.
"""

from __future__ import annotations

import importlib
import math
import sys
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import zstandard

from reference.persistence.filestore import FileStore
from spec.format.json_text import _ENCODER  # the encoder without the lone-surrogate escape
from spec.format.naming import V4_PLAIN_NAME
from spec.log.events import Message
from spec.log.json import MAX_SAFE_INTEGER, JsonValue, int_field
from spec.log.session import ABSENT
from spec.log.surface import SurfacePlan

if __package__:  # imported as tests.broken_values (python -m conformance.mutation)
    from tests.broken_subjects import MutantSubject, PlannedSession
else:  # imported from tests/ (pytest)
    from broken_subjects import MutantSubject, PlannedSession

# --- plumbing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Swap:
    """``module.name`` replaced by ``make(original)`` while a request is handled; with
    ``everywhere``, in every spec and reference module that holds the same object."""

    module: str
    name: str
    make: Callable[[Any], object]
    everywhere: bool = False


@contextmanager
def applied(swap: Swap) -> Iterator[None]:
    original = getattr(importlib.import_module(swap.module), swap.name)
    replacement = swap.make(original)
    holders = [importlib.import_module(swap.module)]
    if swap.everywhere:
        holders = [
            module
            for name, module in list(sys.modules.items())
            if name.startswith(("spec.", "reference.")) and getattr(module, swap.name, None) is original
        ]
    for module in holders:
        setattr(module, swap.name, replacement)
    try:
        yield
    finally:
        for module in holders:
            setattr(module, swap.name, original)


class SwapMutant(MutantSubject):
    """The reference with :attr:`swaps` in place while it answers a request."""

    swaps: ClassVar[tuple[Swap, ...]] = ()

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        with ExitStack() as stack:
            for swap in self.swaps:
                stack.enter_context(applied(swap))
            return super().handle(request)


def replacing(replacement: object) -> Callable[[Any], object]:
    return lambda original: replacement


# --- value-domain slips (SPEC-DECISIONS D5) ---------------------------------------------------------


def _bound_inclusive(value: object) -> bool:
    if type(value) is int or (type(value) is float and math.isfinite(value) and value.is_integer()):
        return abs(value) <= MAX_SAFE_INTEGER + 1
    return False


class SafeIntegerBoundIsInclusive(SwapMutant):
    """Takes 2**53 for a safe integer: the bound written ``<= 2**53`` instead of ``<= 2**53 - 1``
    (SPEC-DECISIONS D5: Number.isSafeInteger; the double 2**53 is in the domain but is no seq)."""

    swaps = (Swap("spec.log.json", "is_safe_integer", replacing(_bound_inclusive), everywhere=True),)
    rule = "D5 safe integer"


def _booleans_count(value: object) -> bool:
    if isinstance(value, bool):
        return True  # Python's bool is an int: True passes as 1
    return (
        isinstance(value, int | float)
        and math.isfinite(value)
        and float(value).is_integer()
        and abs(value) <= MAX_SAFE_INTEGER
    )


class BooleanCountsAsInteger(SwapMutant):
    """Takes ``true`` and ``false`` for the integers 1 and 0 wherever a safe integer is expected
    (a seq, a turn, createdAt, seedLength): an ``isinstance(x, int)`` test in a port whose booleans
    are integers (SPEC-DECISIONS D5: a boolean is never a number)."""

    swaps = (Swap("spec.log.json", "is_safe_integer", replacing(_booleans_count), everywhere=True),)
    rule = "D5 booleans"


def _integers_only(value: object) -> bool:
    return type(value) is int and abs(value) <= MAX_SAFE_INTEGER


class IntegralFloatIsNotAnInteger(SwapMutant):
    """Refuses ``1.0`` where an integer is expected: a port whose JSON reader keeps ``1.0`` a
    float and tests for an integer type (SPEC-DECISIONS D5: an integral double is that integer)."""

    swaps = (Swap("spec.log.json", "is_safe_integer", replacing(_integers_only), everywhere=True),)
    rule = "D5 integral floats"


def _delegation_depth_may_be_boolean(original: Callable[[str, JsonValue], Any]) -> object:
    def validate(session_id: str, record: JsonValue) -> Any:
        if isinstance(record, dict) and type(record.get("delegationDepth")) is bool:
            record = {**record, "delegationDepth": int_field(record, "delegationDepth")}
        return original(session_id, record)

    return validate


class DelegationDepthMayBeBoolean(SwapMutant):
    """Reads a header's ``delegationDepth: true`` as depth 1: the header validator coerces a
    boolean to a number, as a loosely typed port's ``Number(x)`` would (notes/dsh-session-core §9;
    SPEC-DECISIONS D9: a non-negative safe integer)."""

    swaps = (Swap("spec.log.header", "validate_header", _delegation_depth_may_be_boolean, everywhere=True),)
    rule = "HEADER_DELEGATION_DEPTH"


# --- a line splitter that is too eager (notes/dsh-persistence §3.3) --------------------------------


def _eager_splitter(ends: tuple[bytes, ...]) -> Callable[[Any], object]:
    def make(original: Callable[[bytes], Any]) -> object:
        def split(data: bytes) -> Any:
            for end in ends:
                data = data.replace(end, b"\n")  # the byte offsets shift: the splitter never knew them
            return original(data)

        return split

    return make


class SplitsLinesAtUnicodeSeparators(SwapMutant):
    """Ends a JSONL line at U+2028, U+2029 and U+0085 too, as ``str.splitlines`` does, although
    they stand raw inside JSON strings (notes/dsh-persistence §3.3: a line ends only at ``\\n``)."""

    swaps = (
        Swap(
            "spec.format.framing",
            "split_jsonl",
            _eager_splitter(("\u2028".encode(), "\u2029".encode(), "\x85".encode())),
            everywhere=True,
        ),
    )
    rule = "JSONL line ends"


class SplitsLinesAtCarriageReturn(SwapMutant):
    """Ends a JSONL line at a lone ``\\r`` too, as a universal-newline reader does, so that a
    ``\\r\\n`` line end leaves an empty line behind (notes/dsh-persistence §3.3: a line ends only at
    ``\\n``; a ``\\r`` before it is JSON whitespace)."""

    swaps = (Swap("spec.format.framing", "split_jsonl", _eager_splitter((b"\r",)), everywhere=True),)
    rule = "JSONL line ends"


# --- UTF-16 code units versus code points ------------------------------------------------------------


class TokensCountCodePoints(SwapMutant):
    """Prices a text by its code points, where the estimate counts UTF-16 code units (JavaScript's
    ``length``): a character outside the BMP costs one unit instead of two
    (notes/dsh-compaction-projection §3)."""

    swaps = (Swap("spec.shrink.tokens", "utf16_length", replacing(len), everywhere=True),)
    rule = "estimate_text"


def _utf16_units_as_code_points(text: str) -> list[str]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [chr(data[i] | data[i + 1] << 8) for i in range(0, len(data), 2)]


class PruneMeasuresUtf16Units(SwapMutant):
    """Measures and cuts tool-result text in UTF-16 code units, where the pruner counts code points
    (``Array.from``): an astral character counts twice and may be cut in half
    (notes/dsh-compaction-projection §6.2)."""

    swaps = (
        Swap(
            "spec.shrink.prune", "derive_code_points", replacing(_utf16_units_as_code_points), everywhere=True
        ),
    )
    rule = "plan_pruned_content"


def _code_points(text: str) -> list[int]:
    return [ord(char) for char in text]


class SegmentEscapesCodePoints(SwapMutant):
    """Escapes a session id or a cwd per code point (``~1F600``) instead of per UTF-16 code unit
    (``~D83D~DE00``), so that the path of an id with an emoji differs from DSH's
    (notes/dsh-persistence §2.2-§2.3; SPEC-DECISIONS D1)."""

    swaps = (Swap("spec.format.naming", "_utf16_code_units", replacing(_code_points)),)
    rule = "encode_segment"


# --- several content blocks, and block types no rule knows ---------------------------------------


def _first_text_block_only(blocks: Sequence[JsonValue]) -> int:
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            return len(str(block["text"]))
    return 0


class PruneMeasuresFirstTextBlockOnly(SwapMutant):
    """Measures a tool result by its first text block, as if content had one block, where the
    pruner sums every text block (notes/dsh-compaction-projection §6.2)."""

    swaps = (
        Swap(
            "spec.shrink.prune", "derive_text_code_points", replacing(_first_text_block_only), everywhere=True
        ),
    )
    rule = "plan_pruned_content"


def _first_block_priced(original: Callable[[Any], int]) -> object:
    def estimate(blocks: Any) -> int:
        return original(blocks[:1] if isinstance(blocks, (list, tuple)) else blocks)

    return estimate


class PricesFirstBlockOnly(SwapMutant):
    """Prices a message by its first content block only (notes/dsh-compaction-projection §3: the
    price of a content array is summed over every block)."""

    swaps = (Swap("spec.shrink.tokens", "estimate_content", _first_block_priced, everywhere=True),)
    rule = "estimate_content"


def _first_call_only(original: Callable[[JsonValue], list[str]]) -> object:
    return lambda message: original(message)[:1]


class PairsFirstToolCallOnly(SwapMutant):
    """Counts only an assistant message's first tool-call block as open, so that a message calling
    two tools balances after one result (notes/dsh-compaction-projection §1: every tool-call block
    opens a pair)."""

    swaps = (Swap("spec.log.events", "tool_call_ids_of", _first_call_only, everywhere=True),)
    rule = "derive_cut_balance"


KNOWN_BLOCKS = frozenset({"text", "reasoning", "tool-call", "tool-result", "image", "file"})


class _KnownBlocksSession(PlannedSession):
    def derive_messages(self) -> list[Message]:
        return [_known_blocks(message) for message in super().derive_messages()]


def _known_blocks(message: Message) -> Message:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [block for block in content if isinstance(block, dict) and block.get("type") in KNOWN_BLOCKS]
    return {**message, "content": kept} if len(kept) != len(content) else message


class DropsUnknownBlocksFromMessages(MutantSubject):
    """Leaves content blocks of a type it does not know out of the messages it derives, where the
    model is shown every block as logged (notes/dsh-session-core §2.6: a message is its data)."""

    session_class = _KnownBlocksSession
    rule = "derive_event_message"


# --- absent versus null ------------------------------------------------------------------------------

HEADER_OPTIONALS = ("cwd", "parentSession", "seedLength", "origin", "agentPreset")


def _null_optionals_absent(original: Callable[[str, JsonValue], Any]) -> object:
    def validate(session_id: str, record: JsonValue) -> Any:
        if isinstance(record, dict):
            record = {k: v for k, v in record.items() if not (k in HEADER_OPTIONALS and v is None)}
        return original(session_id, record)

    return validate


class HeaderTakesNullForAbsent(SwapMutant):
    """Accepts a header whose optional fields (cwd, parentSession, seedLength, origin, agentPreset)
    are ``null``, reading them as absent: a ``get(k) is None`` test where the rule asks whether the
    key is there (notes/dsh-session-core §4.1; SPEC-DECISIONS D5: absent is ``undefined``)."""

    swaps = (Swap("spec.log.header", "validate_header", _null_optionals_absent, everywhere=True),)
    rule = "validate_header"


class _NullAsAbsentSession(PlannedSession):
    def plan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Any, SurfacePlan]:
        surface_op = ABSENT if surface_op is None else surface_op
        source_event_seqs = ABSENT if source_event_seqs is None else source_event_seqs
        return super().plan(event_type, data, surface_op, source_event_seqs)


class NullSurfaceKeysTakenForAbsent(MutantSubject):
    """Takes an append's ``surfaceOp: null`` or ``sourceEventSeqs: null`` for a key not passed,
    and logs the event without it, where null is a value the rules reject
    (notes/dsh-session-core §3.1; spec/log/session.py ABSENT)."""

    session_class = _NullAsAbsentSession
    rule = "surfaceOp"


# --- storage layout and framing (SPEC-DECISIONS D1, D2) ---------------------------------------------


def _quoted_segment(text: str) -> str:
    return urllib.parse.quote(text, safe="") or "_"


def _quoted_relpath(original: Callable[..., tuple[str, str, str]]) -> object:
    def relpath(header: Any, compressed: bool) -> tuple[str, str, str]:
        project, _, name = original(header, compressed)
        return project, _quoted_segment(str(header.get("id"))), name

    return relpath


class SessionDirectoryPercentEncoded(SwapMutant):
    """Names a session's directory by percent-encoding its id (``a%2Fb``) where D1 escapes each
    UTF-16 unit outside ``[A-Za-z0-9._-]`` as ``~XXXX``: the store finds its own logs, but no other
    implementation finds them (SPEC-DECISIONS D1; notes/dsh-persistence §2.3)."""

    swaps = (
        Swap("reference.persistence.filestore", "derive_session_relpath", _quoted_relpath),
        Swap("reference.persistence.filestore", "encode_segment", replacing(_quoted_segment)),
    )
    rule = "D1 layout"


def _no_project_dir(original: Callable[..., tuple[str, str, str]]) -> object:
    def relpath(header: Any, compressed: bool) -> tuple[str, str, str]:
        return original({**header, "cwd": None}, compressed)

    return relpath


class IgnoresCwdInLayout(SwapMutant):
    """Puts every log under ``_no-cwd``, ignoring the header's cwd, where D1 puts it under the
    cwd's project directory (SPEC-DECISIONS D1; notes/dsh-persistence §2.2)."""

    swaps = (Swap("reference.persistence.filestore", "derive_session_relpath", _no_project_dir),)
    rule = "D1 layout"


def _always_plain(original: Callable[..., tuple[str, str, str]]) -> object:
    def relpath(header: Any, compressed: bool) -> tuple[str, str, str]:
        project, session, _ = original(header, compressed)
        return project, session, V4_PLAIN_NAME

    return relpath


class WritesPlainWhenAskedToCompress(SwapMutant):
    """Writes ``session.v4.jsonl``, uncompressed, in a store configured for compressed logs
    (SPEC-DECISIONS D1: a compressed store's log is ``session.v4.jsonl.zstd``)."""

    swaps = (Swap("reference.persistence.filestore", "derive_session_relpath", _always_plain),)
    rule = "D1 file name"


def _frame_per_line(plaintext: bytes) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    return b"".join(compressor.compress(line + b"\n") for line in plaintext.split(b"\n")[:-1])


class FramesEveryLine(SwapMutant):
    """Compresses each line as its own zstd frame, as a streaming writer flushing per record does,
    where a flush writes its whole batch as one frame (SPEC-DECISIONS D2; notes/dsh-persistence
    §3.2)."""

    swaps = (Swap("reference.persistence.filestore", "compress_frame", replacing(_frame_per_line)),)
    rule = "D2 framing"


def _no_checksum(plaintext: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=False).compress(plaintext)


class FramesWithoutChecksum(SwapMutant):
    """Writes zstd frames without their content checksum, so that a reader cannot tell a damaged
    frame from a good one (notes/dsh-persistence §3.2: each frame carries its checksum)."""

    swaps = (Swap("reference.persistence.filestore", "compress_frame", replacing(_no_checksum)),)
    rule = "D2 framing"


def _surrogates_raw(values: Sequence[JsonValue], *_: object) -> bytes:
    return b"".join(_ENCODER.encode(value).encode("utf-8", "surrogatepass") + b"\n" for value in values)


class WritesLoneSurrogatesRaw(SwapMutant):
    """Writes a lone surrogate as its three raw bytes (WTF-8, as a Rust or Go port's encoder may),
    where JSON text escapes it as ``\\udxxx`` and a line is strict UTF-8 (SPEC-DECISIONS D5;
    notes/dsh-persistence §3.3)."""

    swaps = (Swap("reference.persistence.fastjson", "encode_lines", replacing(_surrogates_raw)),)
    rule = "D5 JSON text"


def _header_without_type(original: Callable[..., Any]) -> object:
    def encode(header: Any) -> Any:
        return {key: value for key, value in original(header).items() if key != "type"}

    return encode


class HeaderLineWithoutType(SwapMutant):
    """Writes the header line without its ``type: "session"`` (notes/dsh-persistence §3.1: the first
    line is the header with ``type: "session"`` in front)."""

    swaps = (Swap("reference.persistence.filestore", "encode_header_line", _header_without_type),)
    rule = "header line"


class _HeaderInFirstBatchStore(FileStore):
    def _publish(self, path: str, header: Any, events: Sequence[Any]) -> None:
        original = self._batch_bytes
        held: list[Sequence[JsonValue]] = []

        def joined(records: Sequence[JsonValue], compressed: bool) -> bytes:
            if events and not held:
                held.append(records)  # the header line waits for the first batch
                return b""
            return original([*(held.pop() if held else ()), *records], compressed)

        self._batch_bytes = joined  # type: ignore[method-assign]
        try:
            super()._publish(path, header, events)
        finally:
            del self._batch_bytes


class HeaderSharesFirstFrame(MutantSubject):
    """Publishes a new log as one zstd frame holding the header line and the first batch, where
    frame 0 is the header line alone (notes/dsh-persistence §3.2: a reader takes the header from
    the first frame without decompressing the rest)."""

    file_store_class = _HeaderInFirstBatchStore
    rule = "D2 framing"


# --- host-language semantics (issue 21 item 8; issue 26 "host-language semantics") -----------------


class ClockTakesBooleans(SwapMutant):
    """Takes ``clock {now: true}`` for the time 1 (and ``false`` for 0): the one op whose argument
    check is an ``isinstance(x, int)`` test in a port whose booleans are integers (PROTOCOL.md:
    ``now`` is a safe integer; SPEC-DECISIONS D5: a boolean is never a number)."""

    swaps = (Swap("reference.subject.sessions", "is_safe_integer", replacing(_booleans_count)),)
    rule = "clock.now"


def _host_equality(left: JsonValue, right: JsonValue) -> bool:
    return left == right  # Python's ==: True == 1 and False == 0


class DeepEqualityByHostEquality(SwapMutant):
    """Compares JSON values with the host language's ``==``, for which ``true`` is ``1`` and
    ``false`` is ``0``: a tool/result rewrite may then turn ``isError: false`` into ``0``
    (notes/dsh-session-core §3.7: deep-equal as JSON, where a boolean is never a number)."""

    swaps = (Swap("spec.log.json", "is_deep_equal_json", replacing(_host_equality), everywhere=True),)
    rule = "validate_tool_result_rewrite"


def _eligible_by_suffix(event_type: object) -> bool:
    return isinstance(event_type, str) and event_type.endswith(
        ("user/message", "assistant/message", "tool/result")
    )


class SurfaceTypeBySuffix(SwapMutant):
    """Takes a plugin's event type that ends like a surface type (``x-tool/result``) for that
    type: eligibility tested by the name's suffix (notes/dsh-session-core §2.1: exactly three
    types can join the surface; §2.4: any other name is an unknown type)."""

    swaps = (
        Swap("spec.log.events", "is_surface_eligible_type", replacing(_eligible_by_suffix), everywhere=True),
    )
    rule = "is_surface_eligible_type"


BROKEN_VALUES: tuple[type[MutantSubject], ...] = (
    SafeIntegerBoundIsInclusive,
    BooleanCountsAsInteger,
    IntegralFloatIsNotAnInteger,
    DelegationDepthMayBeBoolean,
    SplitsLinesAtUnicodeSeparators,
    SplitsLinesAtCarriageReturn,
    TokensCountCodePoints,
    PruneMeasuresUtf16Units,
    SegmentEscapesCodePoints,
    PruneMeasuresFirstTextBlockOnly,
    PricesFirstBlockOnly,
    PairsFirstToolCallOnly,
    DropsUnknownBlocksFromMessages,
    HeaderTakesNullForAbsent,
    NullSurfaceKeysTakenForAbsent,
    SessionDirectoryPercentEncoded,
    IgnoresCwdInLayout,
    WritesPlainWhenAskedToCompress,
    FramesEveryLine,
    FramesWithoutChecksum,
    WritesLoneSurrogatesRaw,
    HeaderLineWithoutType,
    HeaderSharesFirstFrame,
    ClockTakesBooleans,
    DeepEqualityByHostEquality,
    SurfaceTypeBySuffix,
)
