"""Write DSH's expectation files from a certification run, every deviation with its reason.

  python -m scripts.dsh_expectations RUN.json OUT.json [--version V]

``RUN.json`` is ``python -m conformance … --json RUN.json`` run against ``subjects/dsh`` (as
``scripts/certify-dsh.sh`` does, which leaves its runs under ``.tools/reports/``). The file is the
generic one ``--write-expectations`` writes (:func:`conformance.expectations.write_expectations`:
each case that did not pass, with its fingerprint), its cause, kind and source filled in from
:data:`CAUSES`, the hand-written list of what DSH does, where, and what kind of deviation it is
(``scripts/dsh_causes.toml``, read by :func:`load_causes`; ``subjects/dsh/FINDINGS.md`` has the
evidence). A cause may hold in one profile only: the profile
is read from ``OUT.json``'s name (``dsh-<V>-invariants[-kill].json`` is "DSH with invariants", any
other "DSH as shipped"). A case no cause explains, or one whose outcome differs from its cause's status,
is refused: the script prints it and exits 1, so a new deviation is never written down without a
reason. Re-run it when the suite gains cases, and review the diff:

  bash scripts/certify-dsh.sh        # leaves .tools/reports/dsh-0.1.0-rc.8-{seam,kill}.json
  python -m scripts.dsh_expectations .tools/reports/dsh-0.1.0-rc.8-seam.json \
      conformance/expectations/dsh-0.1.0-rc.8.json
  python -m scripts.dsh_expectations .tools/reports/dsh-0.1.0-rc.8-kill.json \
      conformance/expectations/dsh-0.1.0-rc.8-kill.json
  bash scripts/certify-dsh.sh        # now exits 0
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from conformance.expectations import Expectation, encode_expectations, write_expectations

ROOT: Final = Path(__file__).resolve().parent.parent
CAUSES_FILE: Final = Path(__file__).with_name("dsh_causes.toml")
NAME: Final = re.compile(r"\{([A-Z0-9_]+)\}")  # a text of [names], as a reason or a source names it


@dataclass(frozen=True)
class Cause:
    """What DSH does, where, what kind of deviation it is, and which cases it explains: keys matching one of ``keys`` (shell
    patterns), or cases of one of ``rules`` (the spec function a vector exercises); with a ``detail``
    (one text or several), only those whose report says it (one of them). Prefer a rule, a family
    pattern or a detail that names the deviation over one case's key, so that new cases of the same
    deviation (another family's vectors, a stateful family's ``diverges-`` case) are explained too."""

    status: str | tuple[str, ...]  # the outcome it explains (one, or each of several)
    reason: str
    source: str
    kind: str  # conformance.report.KINDS
    keys: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    detail: str | tuple[str, ...] = ""
    invariants: bool | None = None  # the profile it holds in: as shipped (False), with invariants, or both

    @property
    def statuses(self) -> tuple[str, ...]:
        return (self.status,) if isinstance(self.status, str) else self.status

    def explains(self, case: Mapping[str, Any], invariants: bool = False) -> bool:
        if self.invariants is not None and self.invariants != invariants:
            return False
        key, rule = str(case["key"]), str(case.get("rule", ""))
        said = str(case.get("detail", ""))
        details = (self.detail,) if isinstance(self.detail, str) else self.detail
        if any(details) and not any(part and part in said for part in details):
            return False
        # ``rules`` are frozen protocol call names: a pure case's answer names the one it called (a
        # run stored before vectors named rules by their stable names gives it as the rule too)
        return any(fnmatch.fnmatchcase(key, pattern) for pattern in self.keys) or any(
            name == rule or f"{name} " in f"{said} " for name in self.rules
        )


def load_causes(path: Path = CAUSES_FILE) -> tuple[dict[str, str], tuple[Cause, ...]]:
    """The texts of ``path``'s ``[names]``, and its causes in order: each ``[[cause]]`` table a
    :class:`Cause`, every ``{NAME}`` in its reason and source written out. A table holding a key
    :class:`Cause` has no field for is refused (a misspelt field would match every case)."""
    document = tomllib.loads(path.read_text(encoding="utf-8"))
    names: dict[str, str] = document["names"]
    fields = set(Cause.__dataclass_fields__)
    causes: list[Cause] = []
    for entry in document["cause"]:
        if not set(entry) <= fields:
            raise ValueError(f"{path.name}: a cause with unknown fields {sorted(set(entry) - fields)}")
        status, detail = entry["status"], entry.get("detail", "")
        reason, source = (NAME.sub(lambda found: names[found[1]], entry[key]) for key in ("reason", "source"))
        causes.append(
            Cause(
                status if isinstance(status, str) else tuple(status),
                reason,
                source,
                kind=entry["kind"],
                keys=tuple(entry.get("keys", ())),
                rules=tuple(entry.get("rules", ())),
                detail=detail if isinstance(detail, str) else tuple(detail),
                invariants=entry.get("invariants"),
            )
        )
    return names, tuple(causes)


NAMES, CAUSES = load_causes()
UNPUBLISHED: Final = NAMES["UNPUBLISHED"]


def cause_of(case: Mapping[str, Any], invariants: bool = False) -> Cause | None:
    """The first cause that explains the case with the case's own outcome in the profile (as shipped,
    or with invariants), or ``None``."""
    return next((c for c in CAUSES if case["outcome"] in c.statuses and c.explains(case, invariants)), None)


def explain(
    cases: Sequence[Mapping[str, Any]], invariants: bool = False
) -> tuple[list[Expectation], list[str]]:
    """The expectation entries for the cases that did not pass (cause, kind and source from
    :data:`CAUSES`, the fingerprint from the run), and the problems (unexplained cases, or a cause
    whose status is not the case's outcome)."""
    problems: list[str] = []
    for case in cases:
        causes = [cause for cause in CAUSES if cause.explains(case, invariants)]
        if case["outcome"] == "passed" or cause_of(case, invariants) is not None:
            continue
        if causes:
            said = " or ".join(sorted({status for cause in causes for status in cause.statuses}))
            problems.append(f"{case['key']} ended {case['outcome']}, its causes say {said}")
        else:
            problems.append(
                f"no cause explains {case['key']} ({case['outcome']}): {str(case['detail'])[:200]}"
            )
    written = write_expectations("dsh", "", cases, explainer_for(invariants))
    return [entry for entry in written.expectations if not entry.todo], problems


def explainer_for(invariants: bool) -> Callable[[Mapping[str, Any]], tuple[str, str, str] | None]:
    """:func:`cause_of` in one profile, as :func:`conformance.expectations.write_expectations` asks
    for it."""

    def explainer(case: Mapping[str, Any]) -> tuple[str, str, str] | None:
        cause = cause_of(case, invariants)
        return None if cause is None else (cause.reason, cause.kind, cause.source)

    return explainer


def is_invariants(expectations: Path) -> bool:
    """Whether an expectation file is of the profile "DSH with invariants", as its name says
    (``dsh-<VERSION>-invariants[-kill].json``, the name ``certify-dsh.sh --invariants`` reads)."""
    return expectations.name.removesuffix(".json").removesuffix("-kill").endswith("-invariants")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the --json output of a certification run")
    parser.add_argument("out", type=Path, help="the expectation file to write")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text(encoding="utf-8"))
    invariants = is_invariants(args.out)
    _, problems = explain(run["cases"], invariants)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    subject = run["subject"]
    written = write_expectations(
        str(subject["name"]), str(subject["version"]), run["cases"], explainer_for(invariants)
    )
    args.out.write_text(encode_expectations(written), encoding="utf-8")
    print(f"wrote {args.out}: {len(written.expectations)} expected deviations of {len(run['cases'])} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
