"""What ``dsh-session`` says before it reads anything: its exit statuses, the forms ``check``
writes, and the names a directory search takes for logs. Kept apart from the readers and checkers
so that parsing a command line (and ``--help``) imports none of them (issue 24: start-up)."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0  # every log read and broke no rule
EXIT_FINDINGS: Final = 1  # every log read; at least one broke a rule
EXIT_USAGE: Final = 2  # the command line is wrong (argparse's own status), or an output cannot be written
EXIT_UNREADABLE: Final = 3  # a path could not be read, or its bytes are not a valid log
EXIT_NO_LOGS: Final = 4  # a path given holds no log file at all
EXIT_INTERNAL: Final = 70  # a bug in dsh-session itself (EX_SOFTWARE): please report it

EXIT_CODES: Final = (
    (EXIT_OK, "clean: every log was read and breaks no rule"),
    (EXIT_FINDINGS, "findings: at least one log breaks a rule"),
    (EXIT_USAGE, "usage error: a wrong command line, or an output file that cannot be written"),
    (EXIT_UNREADABLE, "unreadable input: a path is missing or unreadable, or a file is not a valid log"),
    (EXIT_NO_LOGS, "no logs: a directory given holds no log file"),
    (EXIT_INTERNAL, "internal error in dsh-session (a bug: please report it)"),
)
EXIT_PRECEDENCE: Final = (EXIT_UNREADABLE, EXIT_NO_LOGS, EXIT_FINDINGS, EXIT_OK)  # the first that applies

CHECK_FORMATS: Final = ("text", "json", "sarif")  # what check --format takes (reference.checking.RENDERERS)

# Names a directory search takes for logs: v4 and v0 names, and what `zstd` makes of them.
LOG_FILE_SUFFIXES: Final = (".jsonl", ".jsonl.zstd", ".jsonl.zst")
