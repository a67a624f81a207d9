"""``dsh-session``: check session logs against the spec, and explain what a log shows the model.

    dsh-session check PATH...       every rule violation of every log (exit 1 if any, 2 if unreadable)
    dsh-session explain PATH        each event with its place on the surface, then the messages
    dsh-session rules               the checker's rules, with what each one means
    dsh-session copy --from A --to B [SESSION...]
                                    copy sessions between backends, verified (reference/transfer.py)

A PATH is a log file (``session.v4.jsonl[.zstd]``, DSH's ``session.jsonl[.zstd]``) or a directory,
searched for log files. check and explain never write: a torn tail is reported, not repaired.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO

from reference.persistence.fastjson import collector_paused
from reference.persistence.filestore import LoadedLog, load_log
from spec.checks.log import LEGACY_RULES, RULES, check_log
from spec.codes import SpecError
from spec.log.events import derive_event_message
from spec.log.json import JsonValue
from spec.log.surface import fold_surface

LOG_FILE_SUFFIXES = (".jsonl", ".jsonl.zstd")  # every log name, v4 or v0, ends with one of these
EXIT_OK, EXIT_VIOLATIONS, EXIT_UNREADABLE = 0, 1, 2


def find_logs(paths: Sequence[str]) -> Iterator[str]:
    """Each path as given, or, for a directory, every log file below it (sorted)."""
    for path in paths:
        if not os.path.isdir(path):
            yield path
            continue
        for folder, _, files in sorted(os.walk(path)):
            for name in sorted(files):
                if name.endswith(LOG_FILE_SUFFIXES):
                    yield os.path.join(folder, name)


def read_log(path: str) -> LoadedLog:
    with open(path, "rb") as file:
        data = file.read()
    return load_log(None, data, path.endswith(".zstd"), os.path.basename(path))


def command_check(paths: Sequence[str], core_only: bool, as_json: bool, out: TextIO) -> int:
    worst = EXIT_OK
    for path in find_logs(paths):
        with collector_paused():  # a log read to be checked holds no reference cycles
            worst = max(worst, _check_one(path, core_only, as_json, out))
    return worst


def _check_one(path: str, core_only: bool, as_json: bool, out: TextIO) -> int:
    try:
        log = read_log(path)
    except SpecError as error:
        _report(
            out,
            as_json,
            {"path": path, "error": {"code": str(error.code), "message": error.message}},
            f"{path}: unreadable [{error.code}] {error.message}",
        )
        return EXIT_UNREADABLE
    except OSError as error:
        _report(
            out,
            as_json,
            {"path": path, "error": {"code": "STORAGE_IO", "message": str(error)}},
            f"{path}: unreadable [STORAGE_IO] {error}",
        )
        return EXIT_UNREADABLE
    events = log.events + log.recovered
    found = check_log(events, log.header, relational=not core_only, format_version=log.format_version)
    violations = [v for v in found if v.rule not in LEGACY_RULES]
    legacy = [v for v in found if v.rule in LEGACY_RULES]
    torn = "" if log.truncate_to is None else f" (torn tail from byte {log.truncate_to} ignored)"
    if as_json:
        rows = [{"rule": v.rule, "seq": v.seq, "message": v.message} for v in violations]
        notes = [{"rule": v.rule, "seq": v.seq, "message": v.message} for v in legacy]
        report = {"path": path, "events": len(events), "tornAt": log.truncate_to, "violations": rows}
        if notes:
            report["legacy"] = notes
        _report(out, True, report, "")
    else:
        verdict = "ok" if not violations else f"{len(violations)} violation(s)"
        if legacy:
            verdict += f", {len(legacy)} legacy finding(s)"
        print(f"{path}: {len(events)} events, format v{log.format_version}, {verdict}{torn}", file=out)
        for violation in found:
            where = "log" if violation.seq is None else f"seq {violation.seq}"
            print(f"  [{violation.rule}] {where}: {violation.message}", file=out)
    return EXIT_VIOLATIONS if violations else EXIT_OK


def command_explain(path: str, out: TextIO) -> int:
    try:
        log = read_log(path)
    except SpecError as error:
        print(f"{path}: unreadable [{error.code}] {error.message}", file=out)
        return EXIT_UNREADABLE
    events = log.events + log.recovered
    try:
        fold = fold_surface(events)
    except SpecError as error:
        print(f"{path}: the surface does not fold [{error.code}] {error.message}", file=out)
        return EXIT_VIOLATIONS
    shadowed_by = {seq: r.seq for r in fold.replacements for seq in r.shadowed}
    visible = set(fold.nodes)
    print(
        f"{path}: session {log.header.get('id')!s}, {len(events)} events, format v{log.format_version}",
        file=out,
    )
    for event in events:
        seq = event.get("seq")
        kind = str(event.get("type"))
        if "surfaceOp" not in event:
            place = "log-only"
        elif seq in visible:
            place = "on the surface" + (
                "" if event["surfaceOp"] == "append" else f" (replaces {_span(event)})"
            )
        else:
            place = f"shadowed by seq {shadowed_by.get(int(seq)) if isinstance(seq, int) else '?'}"
        print(f"  {seq!s:>6}  {kind:<28} {place}", file=out)
    print(f"surface: {len(fold.nodes)} nodes, replaceGeneration {fold.replace_generation}", file=out)
    for seq in fold.nodes:
        message = derive_event_message(events[seq])
        if message is not None:
            print(f"  seq {seq}: {message.get('role')}: {_preview(message.get('content'))}", file=out)
    return EXIT_OK


def command_rules(out: TextIO) -> int:
    for rule, meaning in RULES.items():
        print(f"{rule}\n    {meaning}", file=out)
    return EXIT_OK


def _span(event: JsonValue) -> str:
    op = event.get("surfaceOp") if isinstance(event, dict) else None
    return f"{op.get('start')}..{op.get('end')}" if isinstance(op, dict) else "?"


def _preview(content: JsonValue, width: int = 70) -> str:
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                texts.append(str(block["text"]))
            elif block.get("type") == "tool-call":
                texts.append(f"<tool-call {block.get('name')}>")
            elif block.get("type") == "tool-result":
                texts.append(f"<tool-result {_preview(block.get('content'), width)}>")
            else:
                texts.append(f"<{block.get('type')}>")
    text = " ".join(texts).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _report(out: TextIO, as_json: bool, row: dict[str, object], line: str) -> None:
    print(json.dumps(row) if as_json else line, file=out)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(
        prog="dsh-session", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="report every rule violation of each log")
    check.add_argument("paths", nargs="+")
    check.add_argument(
        "--core-only", action="store_true", help="skip the relational rules DSH does not enforce"
    )
    check.add_argument("--json", action="store_true", help="one JSON object per log")
    explain = commands.add_parser("explain", help="show each event's place on the surface")
    explain.add_argument("path")
    commands.add_parser("rules", help="list the checker's rules")
    copy = commands.add_parser(
        "copy", help="copy sessions between backends (file:, sqlite:, postgres:; logs: as a source)"
    )
    copy.add_argument("--from", dest="source", required=True, metavar="KIND:WHERE")
    copy.add_argument("--to", dest="destination", required=True, metavar="KIND:WHERE")
    copy.add_argument(
        "sessions", nargs="*", metavar="SESSION", help="session ids (default: every session of the source)"
    )
    args = parser.parse_args(argv)
    if args.command == "copy":
        from reference.transfer import command_copy

        return command_copy(args.source, args.destination, args.sessions, out)
    if args.command == "check":
        return command_check(args.paths, args.core_only, args.json, out)
    if args.command == "explain":
        return command_explain(args.path, out)
    return command_rules(out)


if __name__ == "__main__":
    raise SystemExit(main())
