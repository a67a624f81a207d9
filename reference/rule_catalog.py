"""The checker's rules as a catalogue: for each rule id of :data:`spec.checks.log.RULES`, its
sentence, its level, the codes behind it and the spec functions that state it.

Everything is read from the source of ``spec/`` through the project's one reader of it
(:mod:`conformance.spec_index`), never by running a rule, so that the catalogue cannot drift from
the code: a core rule's codes are the codes its rule functions raise
(mapped to rule ids by :data:`spec.checks.log.SURFACE_RULE_OF_CODE` as the checker maps them), a
relational rule's functions are the checker functions that report its id. ``dsh-session rules``
prints it; ``scripts/spec_book.py`` uses the same readings for the spec book.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Final

from conformance.spec_index import read_spec, stable_name
from spec.checks.log import CORE_RULES, RULES, SURFACE_RULE_OF_CODE
from spec.codes import MEANING, Code

# Modules whose codes the checker's core replay (spec.checks.log.check_core) reports by
# SURFACE_RULE_OF_CODE, every other code there being a "surface-op" violation.
SURFACE_MODULES: Final = ("spec.log.surface", "spec.log.provenance", "spec.log.tool_rewrite")
# Checker families: each reports rule ids as Violation("rule-id", ...) literals.
CHECK_MODULES: Final = (
    "spec.checks.log",
    "spec.checks.turns",
    "spec.checks.compaction",
    "spec.checks.lineage",
)
# Checker functions that reach a rule through a seed check report its codes under these ids.
CORE_CHECKS: Final[Mapping[str, str]] = {
    "spec.log.seed.validate_seed_seq": "seq-contiguous",
    "spec.log.seed.validate_seed_envelope": "envelope",
    "spec.log.seed.validate_seed_request_header_reason": "envelope",
    "spec.log.seed.validate_seed_llm_shape": "message-shape",
    "spec.log.seed.validate_message_shape": "message-shape",
    "spec.log.seed.validate_tool_result_message": "message-shape",
    "spec.log.seed.validate_request_header_shape": "message-shape",
}


@dataclass(frozen=True)
class RuleEntry:
    """One rule of the checker, as ``dsh-session rules`` shows it."""

    rule_id: str
    level: str  # "core" or "relational"
    sentence: str
    codes: tuple[Code, ...]  # the rejection codes behind a core rule (a relational rule raises none)
    functions: tuple[str, ...]  # spec functions that state the rule
    checked_by: tuple[str, ...]  # checker functions that report the rule id


# Rule ids a family check chooses at run time (not passed to Violation as a literal), and the check.
CHOSEN_AT_RUN_TIME: Final = {
    "compaction-dangling": "spec.checks.compaction.check_compaction",
    "legacy-compaction-dangling": "spec.checks.compaction.check_compaction",
}


def module_functions(module: str) -> tuple[str, ...]:
    """Every top-level function of a spec module, by name, in source order."""
    return tuple(stable_name(path) for path in read_spec().functions if path.rpartition(".")[0] == module)


def reachable(module: str, name: str, private_only: bool = False) -> Iterator[str]:
    """A function and the functions of its module it names, directly or not (only the private
    helpers, with ``private_only``), as dotted paths."""
    graph = read_spec()
    functions = set(module_functions(module))
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen or current not in functions:
            continue
        seen.add(current)
        yield f"{module}.{current}"
        for callee in sorted(graph.calls.get(f"{module}.{current}", ()), reverse=True):
            callee_module, _, callee_name = callee.rpartition(".")
            if callee_module == module and (not private_only or callee_name.startswith("_")):
                pending.append(callee_name)


def checker_entry_points() -> tuple[str, ...]:
    """The family checks :func:`spec.checks.log.check_log` calls, as dotted paths."""
    graph = read_spec()
    return tuple(
        path
        for path in graph.functions
        if path in graph.calls["spec.checks.log.check_log"] and path.rpartition(".")[0] in CHECK_MODULES
    )


def _reporters() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """For each rule id: the public functions that report it by literal (the rule's statement),
    and the family checks of check_log that reach them."""
    stating: dict[str, list[str]] = {rule: [] for rule in RULES}
    checking: dict[str, list[str]] = {rule: [] for rule in RULES}
    for module in CHECK_MODULES:
        for name in module_functions(module):
            if not name.startswith("_"):
                for path in reachable(module, name, private_only=True):
                    for rule in read_spec().reports[path]:
                        if rule in stating and f"{module}.{name}" not in stating[rule]:
                            stating[rule].append(f"{module}.{name}")
    for entry in checker_entry_points():
        module, _, name = entry.rpartition(".")
        for path in reachable(module, name):
            for rule in read_spec().reports[path]:
                if rule in checking and entry not in checking[rule]:
                    checking[rule].append(entry)
    for rule, function in CHOSEN_AT_RUN_TIME.items():
        # check_compaction picks one of these ids by the log's format, so no literal names it
        for table in (stating, checking):
            if function not in table[rule]:
                table[rule].append(function)
    for rule in {*SURFACE_RULE_OF_CODE.values(), "surface-op"}:
        # check_core reports the surface rules by their codes (SURFACE_RULE_OF_CODE), not by literal
        if "spec.checks.log.check_core" not in checking[rule]:
            checking[rule].append("spec.checks.log.check_core")
    return stating, checking


@cache
def rule_catalog() -> tuple[RuleEntry, ...]:
    """Every rule of :data:`spec.checks.log.RULES`, in its order."""
    codes: dict[str, list[Code]] = {rule: [] for rule in RULES}
    functions: dict[str, list[str]] = {rule: [] for rule in RULES}

    def add(rule: str, function: str, code: Code) -> None:
        if code not in codes[rule]:
            codes[rule].append(code)
        if function not in functions[rule]:
            functions[rule].append(function)

    for module in SURFACE_MODULES:
        for name in module_functions(module):
            if not name.startswith("_"):
                for code in _codes_reached(module, name):
                    add(SURFACE_RULE_OF_CODE.get(Code(code), "surface-op"), f"{module}.{name}", Code(code))
    for path, rule in CORE_CHECKS.items():
        module, _, name = path.rpartition(".")
        for code in _codes_reached(module, name):
            add(rule, path, Code(code))
    stating, checking = _reporters()
    return tuple(
        RuleEntry(
            rule_id=rule,
            level="core" if rule in CORE_RULES else "relational",
            sentence=sentence,
            codes=tuple(codes[rule]),
            functions=tuple(functions[rule]) or tuple(stating[rule]),
            checked_by=tuple(checking[rule]),
        )
        for rule, sentence in RULES.items()
    )


def _codes_reached(module: str, name: str) -> tuple[str, ...]:
    found: list[str] = []
    for path in reachable(module, name, private_only=True):
        found += [code for code in read_spec().codes[path] if code not in found]
    return tuple(found)


def code_meaning(code: Code) -> str:
    return MEANING.get(code, "")
