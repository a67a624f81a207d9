"""``dsh-session``: check session logs against the spec, explain what a log shows the model, list
the rules, copy sessions between backends.

Every failure is a typed error with a stable code and a sentence, never a traceback; the exit
statuses are :data:`reference.exits.EXIT_CODES` (shown by ``--help``). Parsing the command line
imports no reader or checker: each command imports what it runs when it runs (start-up, issue 24).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, NoReturn, TextIO

from reference.exits import (
    CHECK_FORMATS,
    EXIT_CODES,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_USAGE,
    LOG_FILE_SUFFIXES,
)

if TYPE_CHECKING:
    from reference.checking import Outcome

PATHS_HELP = (
    "log files (read whatever their name: zstd or plain JSONL is told from the content) or "
    f"directories, searched for files named {', '.join('*' + suffix for suffix in LOG_FILE_SUFFIXES)}"
)


class UsageError(Exception):
    """A command line that names something unusable (exit status 2)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors end with exit status 2 and a pointer to --help."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _paragraph(text: str) -> str:
    """Prose for --help, wrapped as argparse wraps its own (RawDescriptionHelpFormatter does not)."""
    return textwrap.fill(text, width=79)


def exit_code_table(indent: str = "  ") -> str:
    return "\n".join(f"{indent}{status:>3}  {meaning}" for status, meaning in EXIT_CODES)


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="dsh-session",
        description=_paragraph(
            "Check DSH session logs against the specification, explain what a log shows the model, "
            "list the checker's rules, and copy sessions between backends."
        ),
        epilog="exit status:\n"
        + exit_code_table()
        + "\n\nRun dsh-session COMMAND --help for a command's options.",
        formatter_class=formatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    check = commands.add_parser(
        "check",
        help="report every rule violation of each log",
        description=_paragraph(
            "Check each log against every rule of the spec (the core rules a DSH session enforces "
            "when it loads a log, and the relational rules of how its events nest). Repeated violations "
            "of one rule are grouped. Nothing is written: a torn tail is reported, not repaired."
        ),
        epilog="exit status:\n"
        + exit_code_table()
        + "\n\nWhen several apply, the first of 3, 4, 1 is the status.\n\n"
        "reading limits (environment; a file past one is unreadable, 3):\n"
        "  DSH_SESSION_MAX_LINE_BYTES          longest line (default 64 MiB): LINE_TOO_LONG\n"
        "  DSH_SESSION_MAX_DECOMPRESSED_BYTES  a zstd log's plaintext (default 512 MiB): DECOMPRESSED_TOO_LARGE\n"
        "  DSH_SESSION_MAX_NON_EVENT_LINES     lines that are no event (default 1,000): TOO_MANY_NON_EVENT_LINES",
        formatter_class=formatter,
    )
    check.add_argument("paths", nargs="+", metavar="PATH", help=PATHS_HELP)
    check.add_argument(
        "--core-only",
        action="store_true",
        help="check only the core rules (what a DSH session itself refuses to load), "
        "not the relational ones (turns, steps, tool calls, compaction brackets, lineage)",
    )
    check.add_argument(
        "--format",
        choices=CHECK_FORMATS,
        default="text",
        help="text for people (the default), json for one JSON object per log, "
        "sarif for a SARIF 2.1.0 log for CI annotations",
    )
    check.add_argument("--json", action="store_true", help="the same as --format json")
    check.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="check the logs in N processes (the output and the exit status are the same, in the same order)",
    )
    check.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="check the logs on the workers of the Dask scheduler at ADDRESS (tcp://host:port; "
        "needs the distributed package)",
    )
    explain = commands.add_parser(
        "explain",
        help="show each event's place on the surface",
        description=_paragraph(
            "Show what each event of a log contributes to the surface the model sees: on it, "
            "shadowed by a replace, or log-only; then the messages of the surface. With --html, write one "
            "self-contained page that draws the log as a timeline."
        ),
        epilog="exit status:\n"
        "    0  explained\n"
        "    1  the log breaks a core rule (its refused events are marked; the page is written all the same)\n"
        "    2  usage error, or the --html file cannot be written\n"
        "    3  the log cannot be read\n"
        f"   {EXIT_INTERNAL}  internal error in dsh-session (a bug: please report it)",
        formatter_class=formatter,
    )
    explain.add_argument("path", metavar="PATH", help="a log file (zstd or plain JSONL, v4 or DSH's v0)")
    explain.add_argument(
        "--html", metavar="OUT", help="write the explanation as a self-contained HTML page to OUT"
    )
    rules = commands.add_parser(
        "rules",
        help="list the checker's rules",
        description=_paragraph(
            "List every rule of the checker: its id and level, its sentence, the codes behind it "
            "and the spec functions that state it."
        ),
        formatter_class=formatter,
    )
    rules.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    copy = commands.add_parser(
        "copy",
        help="copy sessions between backends (file:, sqlite:, postgres:; logs: as a source)",
        description=_paragraph(
            "Copy sessions between backends, each one verified by reading it back. An endpoint is "
            "KIND:WHERE: file:ROOT (file+plain:ROOT writes plain JSONL), sqlite:PATH, postgres:DSN "
            "(postgres:DSN#SCHEMA), and logs:PATH as a source only."
        ),
        epilog="exit status:\n"
        "    0  every session is at the destination and verified\n"
        "    1  a session was refused or failed to verify\n"
        "    2  usage error: an endpoint that cannot be used\n"
        "    3  a session or an endpoint could not be read",
        formatter_class=formatter,
    )
    copy.add_argument("--from", dest="source", required=True, metavar="KIND:WHERE", help="where to copy from")
    copy.add_argument(
        "--to", dest="destination", required=True, metavar="KIND:WHERE", help="where to copy to"
    )
    copy.add_argument(
        "sessions", nargs="*", metavar="SESSION", help="session ids (default: every session of the source)"
    )
    return parser


def command_check(
    paths: Sequence[str], core_only: bool, form: str, out: TextIO, jobs: int = 1, cluster: str | None = None
) -> int:
    from reference.checking import RENDERERS, check_paths

    if jobs < 1:
        raise UsageError("BAD_JOBS", f"--jobs must be 1 or more, not {jobs}")
    if jobs == 1 and cluster is None:
        return RENDERERS[form](check_paths(paths, core_only), out)
    return RENDERERS[form](check_paths_in_parallel(paths, core_only, jobs, cluster), out)


def check_paths_in_parallel(
    paths: Sequence[str], core_only: bool, jobs: int, cluster: str | None
) -> Iterator[Outcome]:
    """:func:`reference.checking.check_paths`'s outcomes, in its order, the logs checked by
    ``jobs`` processes or on the workers of a Dask ``cluster``."""
    from conformance.cluster import map_ordered
    from reference.checking import NoLogs, check_log_file_to_send
    from reference.logfile import find_logs

    plan: list[str | NoLogs] = []
    for path in paths:
        plan += list(find_logs([path])) or [NoLogs(path)]
    logs = [entry for entry in plan if isinstance(entry, str)]
    checked = map_ordered(partial(check_log_file_to_send, core_only=core_only), logs, jobs, cluster)
    for entry in plan:
        yield entry if isinstance(entry, NoLogs) else next(checked)


def command_explain(path: str, html: str | None, out: TextIO, err: TextIO) -> int:
    from reference.explain import explain_log, render_explain_text
    from reference.logfile import InputError, read_log_file
    from spec.codes import SpecError

    if html is not None:
        validate_output_path(html)
    try:
        file = read_log_file(path)
    except (InputError, SpecError) as error:
        print(f"dsh-session explain: cannot read {path} [{error.code}] {error.message}", file=err)
        return EXIT_UNREADABLE
    explanation = explain_log(file)
    if html is None:
        render_explain_text(explanation, out)
    else:
        from reference.explain_html import render_explain_html

        page = render_explain_html(explanation)
        try:
            with open(html, "w", encoding="utf-8") as written:
                written.write(page)
        except OSError as error:
            raise UsageError(
                "OUTPUT_NOT_WRITABLE", f"cannot write {html}: {error.strerror or error}"
            ) from None
        print(f"wrote {html} ({len(explanation.rows)} events)", file=out)
    return EXIT_FINDINGS if explanation.breaks_core_rules else EXIT_OK


def validate_output_path(path: str) -> None:
    """An output file must be writable before any work is done: its folder exists and it is not a
    directory."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError("OUTPUT_NOT_WRITABLE", f"cannot write {path}: it is a directory")
    if not os.path.isdir(folder):
        raise UsageError("OUTPUT_NOT_WRITABLE", f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError("OUTPUT_NOT_WRITABLE", f"cannot write {path}: permission denied")


def command_rules(form: str, out: TextIO) -> int:
    from reference.rule_catalog import code_meaning, rule_catalog

    catalog = rule_catalog()
    if form == "json":
        rows = [
            {
                "id": entry.rule_id,
                "level": entry.level,
                "sentence": entry.sentence,
                "codes": [{"code": str(code), "meaning": code_meaning(code)} for code in entry.codes],
                "functions": list(entry.functions),
                "checkedBy": list(entry.checked_by),
            }
            for entry in catalog
        ]
        print(json.dumps(rows, indent=2), file=out)
        return EXIT_OK
    wrap = textwrap.TextWrapper(width=100, initial_indent="    ", subsequent_indent="    ")
    for entry in catalog:
        print(f"{entry.rule_id} ({entry.level})", file=out)
        print(wrap.fill(entry.sentence), file=out)
        if entry.codes:
            print("    codes:", file=out)
            for code in entry.codes:
                print(f"      {code}: {code_meaning(code)}", file=out)
        else:
            print(
                "    codes: none (a relational rule is reported by the checker, not raised by a rule)",
                file=out,
            )
        print(f"    spec: {', '.join(entry.functions)}", file=out)
        print(f"    checked by: {', '.join(entry.checked_by)}", file=out)
        print(file=out)
    core = sum(1 for entry in catalog if entry.level == "core")
    print(
        f"{len(catalog)} rules: {core} core, {len(catalog) - core} relational (dsh-session check --core-only "
        "checks the core ones alone)",
        file=out,
    )
    return EXIT_OK


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "copy":
        from reference.transfer import command_copy

        return command_copy(args.source, args.destination, args.sessions, out)
    if args.command == "check":
        form = "json" if args.json else args.format
        return command_check(args.paths, args.core_only, form, out, args.jobs, args.cluster)
    if args.command == "explain":
        return command_explain(args.path, args.html, out, err)
    return command_rules(args.format, out)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command line; returns the exit status (no traceback on any path: a bug in this
    program says so, with exit status 70, and ``DSH_SESSION_TRACEBACK=1`` shows its traceback)."""
    args = build_parser().parse_args(argv)
    try:
        return run(args, out, err)
    except UsageError as error:
        print(f"dsh-session {args.command}: error [{error.code}] {error.message}", file=err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"dsh-session {args.command}: interrupted", file=err)
        return 130  # 128 + SIGINT, as a shell reports it
    except BrokenPipeError:
        # The reader of the output went away (dsh-session check ... | head): nothing more to say.
        # Point stdout at /dev/null so that the interpreter's flush at exit does not fail again.
        if out is sys.stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13  # 128 + SIGPIPE, as a shell reports a writer whose reader left
    except Exception as error:
        if os.environ.get("DSH_SESSION_TRACEBACK"):
            raise
        print(
            f"dsh-session {args.command}: internal error [INTERNAL] {type(error).__name__}: {error} "
            "(a bug in dsh-session: please report it; DSH_SESSION_TRACEBACK=1 shows the traceback)",
            file=err,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
