"""``dsh-session explain --html OUT``: one self-contained page (inline CSS, no script, nothing
fetched from a network) that draws a log as a timeline, for people learning how a log works.

What the page shows, top to bottom:

- the header: the session, its format, and its lineage — the parent it was forked from and how
  many events it inherited (``parentSession``, ``seedLength``);
- counts: turns (closed and open), compactions, replaces, violations;
- the timeline, one row per event, inside its turn: where the event stands (on the surface the
  model sees, shadowed by a replace, log-only, or refused by the spec), each replace with the span
  it shadowed and links both ways, the seed the log inherited (shaded) and the ``session/end-seed``
  that closes it, open compaction brackets, and every checker violation at the event it names;
- beside it, the surface as the model sees it: the messages of the final surface, in order.

The page is built from :class:`reference.explain.Explanation`; it decides nothing itself.

A long log is collapsed, so that the page stays a page (400,000 events drawn row by row were a
79 MB file): beyond :data:`DRAWN_EDGE_ROWS` events at each end, an event of the middle is drawn
only when it has something to show — a violation, a refused surface effect, a replace — and at
most :data:`DRAWN_MARKED_ROWS` of those; every run of events not drawn is one line that says
which seqs it holds (``dsh-session explain`` without ``--html`` lists every event). The surface
beside it likewise shows its first and last :data:`DRAWN_EDGE_NODES` nodes. So a page holds at
most 2 × 1,000 + 1,000 event rows and 2 × 500 surface nodes, about 2 MB whatever the log's length.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.resources import files

from reference.explain import EventRow, Explanation, Span, preview
from spec.checks.log import CORE_RULES
from spec.checks.violation import Violation

DRAWN_EDGE_ROWS = 1_000  # events drawn at each end of the timeline
DRAWN_MARKED_ROWS = 1_000  # events of the middle drawn for a violation, a refusal or a replace
DRAWN_EDGE_NODES = 500  # surface nodes drawn at each end of the surface list

STYLE = "\n" + (files("reference") / "explain.css").read_text(encoding="utf-8")


def render_explain_html(explanation: Explanation) -> str:
    """The whole page as one string."""
    return "\n".join(_page(explanation)) + "\n"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(x: Explanation) -> Iterator[str]:
    header = x.file.log.header
    title = f"Session {header.get('id')}"
    yield "<!DOCTYPE html>"
    yield '<html lang="en"><head><meta charset="utf-8">'
    yield '<meta name="viewport" content="width=device-width, initial-scale=1">'
    # no network: nothing is fetched, so the page works offline and leaks nothing
    yield "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
    yield f"<title>{_e(title)} — dsh-session explain</title>"
    yield f"<style>{STYLE}</style></head><body>"
    yield '<header class="page">'
    yield f"<h1>{_e(title)}</h1>"
    yield (
        f'<div class="sub">{_e(x.file.path)} · format v{x.file.log.format_version} ({_e(x.file.form)}) · '
        f"{len(x.rows)} events · created {_e(_when(header.get('createdAt')))}"
        + (f" · cwd <code>{_e(header.get('cwd'))}</code>" if header.get("cwd") is not None else "")
        + "</div>"
    )
    yield "</header><main><div>"
    yield from _lineage(x)
    yield from _counts(x)
    yield from _timeline(x)
    yield "</div>"
    yield from _surface(x)
    yield "</main>"
    yield (
        "<footer>Written by <code>dsh-session explain --html</code>. Surface, shadows and violations are the "
        "spec's own judgements (spec.log.surface, spec.checks.log); <code>dsh-session rules</code> explains "
        "every rule id.</footer>"
    )
    yield "</body></html>"


def _lineage(x: Explanation) -> Iterator[str]:
    header = x.file.log.header
    parent = header.get("parentSession")
    yield '<section class="card lineage" id="lineage"><h2>Lineage</h2>'
    if parent is None and x.seed_length is None:
        if header.get("isSeeded") is True:
            yield "<p>Created from a seed (<code>isSeeded: true</code>) with no parent named.</p>"
        else:
            yield "<p>A root session: no parent, nothing inherited (<code>isSeeded: false</code>).</p>"
    else:
        yield (
            f'<p>Forked from <b class="mono">{_e(parent)}</b>: the first <b>{_e(x.seed_length)}</b> events '
            f"(<code>seedLength</code>) are the <b>seed</b>, copied from the parent's log, shaded below.</p>"
        )
    if x.end_seeds:
        marks = ", ".join(f'<a href="#seq-{seq}">seq {seq}</a>' for seq in x.end_seeds)
        yield (
            f"<p>The <b>end-seed</b> (<code>session/end-seed</code>) at {marks} closes what was inherited or "
            "restored: events after it are this session's own.</p>"
        )
    depth = header.get("delegationDepth")
    origin = header.get("origin")
    details = [f"delegationDepth {_e(depth)}"]
    if origin is not None:
        details.append(f"origin <code>{_e(origin)}</code>")
    if header.get("agentPreset") is not None:
        details.append(f"agentPreset <code>{_e(header.get('agentPreset'))}</code>")
    yield f'<p class="mono" style="color:var(--muted)">{" · ".join(details)}</p>'
    yield "</section>"


def _counts(x: Explanation) -> Iterator[str]:
    closed = sum(1 for span in x.turns if span.end is not None)
    still_open = len(x.turns) - closed
    core = sum(1 for v in x.violations if v.rule in CORE_RULES)
    relational = len(x.violations) - core
    chips = [
        f"{len(x.rows)} events",
        f"{len(x.surface)} on the surface",
        f"{x.replace_generation} replace{'s' if x.replace_generation != 1 else ''} (replaceGeneration)",
        f"{closed} closed turn{'s' if closed != 1 else ''}",
        f"{still_open} open turn{'s' if still_open != 1 else ''}",
        f"{len(x.compactions)} compaction{'s' if len(x.compactions) != 1 else ''}",
    ]
    yield '<section class="card"><h2>At a glance</h2><div class="chips">'
    for chip in chips:
        yield f'<span class="chip">{_e(chip)}</span>'
    if x.violations:
        count = len(x.violations)
        yield (
            f'<span class="chip bad">{count} violation{"s" if count != 1 else ""} '
            f"({core} core, {relational} relational)</span>"
        )
    else:
        yield '<span class="chip ok">no violations: every rule holds</span>'
    yield "</div>"
    yield '<div class="legend" style="margin-top:10px">'
    for label, color in (
        ("on the surface", "var(--surface)"),
        ("shadowed by a replace", "var(--shadow)"),
        ("replace", "var(--replace)"),
        ("seed (inherited)", "var(--seed)"),
        ("violation", "var(--bad)"),
        ("relational violation", "var(--warn)"),
    ):
        yield f'<span style="--c:{color}">{_e(label)}</span>'
    yield "</div>"
    for violation in x.log_violations:
        yield f'<div class="violation {_level(violation)}" style="margin-top:8px">{_violation_text(violation)}</div>'
    yield "</section>"


def drawn_rows(x: Explanation) -> list[bool]:
    """Per event, whether the timeline draws it: every event of a short log; of a long one the
    first and last :data:`DRAWN_EDGE_ROWS`, and the first :data:`DRAWN_MARKED_ROWS` of the
    middle that carry a violation, a refused surface effect or a replace."""
    count = len(x.rows)
    if count <= 2 * DRAWN_EDGE_ROWS:
        return [True] * count
    drawn = [seq < DRAWN_EDGE_ROWS or seq >= count - DRAWN_EDGE_ROWS for seq in range(count)]
    marked = 0
    for row in x.rows[DRAWN_EDGE_ROWS : count - DRAWN_EDGE_ROWS]:
        if marked == DRAWN_MARKED_ROWS:
            break
        if row.violations or row.refused is not None or row.replaces is not None:
            drawn[row.seq] = True
            marked += 1
    return drawn


def _collapsed(first: int, last: int) -> str:
    count = last - first + 1
    return (
        f'<li class="collapsed">{count} event{"s" if count != 1 else ""} not drawn (seqs {first}–{last}): '
        "a long log is collapsed; <code>dsh-session explain</code> without <code>--html</code> lists every event</li>"
    )


def _timeline(x: Explanation) -> Iterator[str]:
    yield '<section class="card"><h2>Timeline</h2><ol class="timeline">'
    turn_of_start = {span.start: span for span in x.turns}
    turn_end = {span.end: span for span in x.turns if span.end is not None}
    starts = [span.start for span in x.turns]
    drawn = drawn_rows(x)
    in_turn: Span | None = None
    outside_open = False
    gap_from: int | None = None  # the first seq of the run of events not drawn so far
    for row in x.rows:
        if not drawn[row.seq]:
            if in_turn is not None or outside_open:
                yield "</ol></li>"
                in_turn, outside_open = None, False
            gap_from = row.seq if gap_from is None else gap_from
            continue
        if gap_from is not None:
            yield _collapsed(gap_from, row.seq - 1)
            gap_from = None
            # drawing resumes inside the turn the first event not drawn was in: its head again
            index = bisect.bisect_right(starts, row.seq) - 1
            span = x.turns[index] if index >= 0 else None
            if span is not None and span.start < row.seq and (span.end is None or span.end >= row.seq):
                in_turn = span
                yield from _turn_head(span, continued=True)
        if row.seq in turn_of_start:
            if outside_open:
                yield "</ol></li>"
                outside_open = False
            if in_turn is not None:
                yield "</ol></li>"
            in_turn = turn_of_start[row.seq]
            yield from _turn_head(in_turn)
        elif in_turn is None and not outside_open:
            yield '<li class="turn" style="--turn:#c5cbd6"><div class="turn-head">between turns</div><ol class="events">'
            outside_open = True
        if x.seed_length and row.seq == x.seed_length and row.seq not in x.end_seeds:
            yield f'<li class="seed-marker">— the seed ends here: seqs 0–{x.seed_length - 1} came from the parent —</li>'
        yield from _event(x, row)
        if in_turn is not None and row.seq in turn_end and turn_end[row.seq] is in_turn:
            yield "</ol></li>"
            in_turn = None
    if in_turn is not None or outside_open:
        yield "</ol></li>"
    yield "</ol></section>"


def _turn_head(span: Span, continued: bool = False) -> Iterator[str]:
    number = span.label.rsplit(" ", 1)[-1]
    hue = (int(number) * 67 + 200) % 360 if number.isdigit() else 210
    state = (
        f"closed at seq {span.end}: {_e(span.outcome)}"
        if span.end is not None
        else ("open: no turn/end" if span.outcome == "open" else _e(span.outcome))
    )
    open_class = " open" if span.end is None else ""
    yield (
        f'<li class="turn{open_class}" style="--turn:hsl({hue} 55% 48%)"><div class="turn-head">{_e(span.label)}'
        f"{' (continued)' if continued else ''} "
        f'<span class="state">seq {span.start} · {state}</span></div><ol class="events">'
    )


def _event(x: Explanation, row: EventRow) -> Iterator[str]:
    classes = ["event"]
    tags: list[str] = []
    if row.refused is not None:
        classes.append("refused")
        tags.append('<span class="tag open">refused</span>')
    elif row.log_only:
        tags.append('<span class="tag logonly">log-only</span>')
    elif row.on_surface:
        classes.append("surface")
        tags.append('<span class="tag surface">on the surface</span>')
    elif row.shadowed_by is not None:
        classes.append("shadowed")
        tags.append(
            f'<span class="tag shadowed">shadowed by <a href="#seq-{row.shadowed_by}">seq {row.shadowed_by}</a></span>'
        )
    if row.replaces is not None:
        start, end = row.replaces
        shadows = ", ".join(f'<a href="#seq-{seq}">{seq}</a>' for seq in row.shadows) or "nothing"
        tags.append(f'<span class="tag replace">replaces {start}–{end}: shadows {shadows}</span>')
    if row.inherited:
        classes.append("seed")
        tags.append('<span class="tag seed">seed</span>')
    if row.kind == "session/end-seed":
        classes.append("end-seed")
        tags.append('<span class="tag seed">end of the seed</span>')
    if row.compaction is not None:
        classes.append("in-compaction")
        tags.append(f'<span class="tag compaction">compaction {_e(row.compaction)}</span>')
    if row.recovered:
        tags.append('<span class="tag open">recovered from a torn frame</span>')
    if row.step is not None and row.turn is not None:
        tags.append(f'<span class="tag logonly">step {row.step}</span>')
    text = ""
    if row.message is not None:
        text = f'<span class="text"><b>{_e(row.message.get("role"))}</b>: {_e(preview(row.message.get("content"), 110))}</span>'
    line = f"line {row.place.line}" if row.place is not None else ""
    yield (
        f'<li class="{" ".join(classes)}" id="seq-{row.seq}"><span class="seq">{row.seq}</span>'
        f'<span class="line">{line}</span><span class="kind">{_e(row.kind)}</span>'
        f"<span>{''.join(tags)} {text}</span>"
    )
    if row.refused is not None:
        yield f'<div class="violation">the spec refuses its surface effect: {_e(row.refused)}</div>'
    for violation in row.violations:
        yield f'<div class="violation {_level(violation)}">{_violation_text(violation)}</div>'
    yield "</li>"


def _surface(x: Explanation) -> Iterator[str]:
    yield '<aside><section class="card" id="surface"><h2>The surface as the model sees it</h2>'
    yield (
        f'<p style="color:var(--muted);margin-top:0">{len(x.surface)} nodes after replaceGeneration '
        f"{x.replace_generation}: the messages the next request sends, in order.</p>"
    )
    yield '<ol class="surface-list">'
    nodes = list(x.surface)
    if len(nodes) > 2 * DRAWN_EDGE_NODES:
        hidden = len(nodes) - 2 * DRAWN_EDGE_NODES
        first, last = nodes[DRAWN_EDGE_NODES], nodes[-DRAWN_EDGE_NODES - 1]
        nodes[DRAWN_EDGE_NODES:-DRAWN_EDGE_NODES] = [-1]
    for seq in nodes:
        if seq < 0:
            yield f'<li class="collapsed">{hidden} nodes not drawn (seqs {first}–{last})</li>'
            continue
        row = x.rows[seq]
        message = row.message
        if message is None:
            continue
        role = str(message.get("role"))
        source = message.get("source")
        kind = "tool" if isinstance(source, dict) and source.get("kind") == "tool" else role
        classes = [kind] + (["replacement"] if row.replaces is not None else [])
        meta = f'<a href="#seq-{seq}">seq {seq}</a>'
        if row.replaces is not None:
            meta += f" · replaces {row.replaces[0]}–{row.replaces[1]}"
        if row.inherited:
            meta += " · seed"
        yield (
            f'<li class="{" ".join(classes)}"><span class="meta">{meta}</span><span class="who">{_e(kind)}</span>'
            f"<div>{_e(preview(message.get('content'), 300))}</div></li>"
        )
    yield "</ol></section></aside>"


def _when(created: object) -> str:
    """``createdAt`` (ms since the epoch) as stored, with its UTC date when it is a plausible one."""
    if isinstance(created, int) and not isinstance(created, bool) and 0 <= created < 10**14:
        moment = datetime.fromtimestamp(created / 1000, tz=UTC)
        return f"{created} ({moment:%Y-%m-%d %H:%M:%S} UTC)"
    return str(created)


def _level(violation: Violation) -> str:
    return "core" if violation.rule in CORE_RULES else "relational"


def _violation_text(violation: Violation) -> str:
    return f"<b>{_e(violation.rule)}</b> ({_level(violation)}): {_e(violation.message)}"
