"""The families of a run that are not vectors: checks that generate their own workloads.

Each is a function of the subject and the run's options that returns its cases; the runner runs
them after the vectors, in this order. A new family is a new row here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from conformance.crash import check_crash
from conformance.crash_rules import D3_ITEMS
from conformance.exhaustive import check_exhaustive
from conformance.files.writing import CHECKS, check_files
from conformance.machine import check_machine
from conformance.pure_drt import FIELD_RULES, check_pure_drt
from conformance.report import CaseResult, Options
from conformance.subject import Subject
from conformance.trace import check_trace
from conformance.trace.summary import ITEM_SENTENCES
from spec.wire import WIRE_FUNCTIONS

CheckFn = Callable[[Subject, Options], list[CaseResult]]

STATEFUL_FAMILIES: Final[Mapping[str, CheckFn]] = {
    "pure-drt": check_pure_drt,  # every pure function against the spec, on generated inputs
    "files": check_files,  # the bytes a storage subject writes, read by the spec's reader
    "machine": check_machine,  # a Hypothesis state machine beside the spec model
    "exhaustive": check_exhaustive,  # every short operation sequence, states deduplicated
    "crash": check_crash,  # power cuts at every point, or SIGKILLs over stdio (SPEC-DECISIONS D3)
    "trace": check_trace,  # every crash state the subject's system calls allow (CRASH-STATES.md)
}
# Families that run only when named in --families, or when their flag is set in Options.extra
# (the trace family needs strace and takes longer than the rest of a run).
OPT_IN: Final[Mapping[str, str]] = {"trace": "trace-crashes"}

# The rules each family judges, for the certificate's fixed denominator: a case without a rule of
# its own belongs to the rule its key names, else to its family's first rule (a machine's or the
# exhaustive checker's disagreement belongs to its agreement rule).
FAMILY_RULES: Final[Mapping[str, tuple[str, ...]]] = {
    "pure-drt": (*WIRE_FUNCTIONS, *FIELD_RULES),
    "files": ("files/replay", *(f"files/{key}" for key in CHECKS)),
    "machine": ("machine/agrees",),
    "exhaustive": ("exhaustive/agrees",),
    "crash": (*D3_ITEMS, "replay"),
    "trace": tuple(ITEM_SENTENCES),
}
