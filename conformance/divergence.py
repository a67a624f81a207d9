"""Disagreements a stateful family met and went on past (SPEC-DECISIONS D11: a family that finds
a disagreement reports it, with an example, and goes on).

The machine and the exhaustive checker stop an example (or a branch of the search) at its first
disagreement with the spec model, record it here by its signature (how the answer differed, data
left out), and carry on with the rest. Each distinct signature becomes one failed case, named by
the signature (so an expectation file can name it) and shown with the first program that met it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from conformance.report import CaseResult, case_slug


@dataclass
class Divergence:
    """One way the subject differs: its signature, how often it was met, and the first example."""

    signature: str
    first: str
    count: int = 1


@dataclass
class Divergences:
    """Every distinct disagreement of one run, in the order they were first met."""

    found: dict[str, Divergence] = field(default_factory=dict)
    stops: int = 0  # how many examples (or branches) a disagreement stopped

    def record(self, signature: str, example: str, stops: bool = True) -> None:
        self.stops += stops
        seen = self.found.get(signature)
        if seen is None:
            self.found[signature] = Divergence(signature, example)
        else:
            seen.count += 1

    def __bool__(self) -> bool:
        return bool(self.found)

    def cases(self, family: str, out_of: str, seconds: float = 0.0) -> list[CaseResult]:
        """One failed case per signature: ``family/diverges-<signature>``."""
        return [
            CaseResult(
                family,
                f"the subject diverges from the spec model: {item.signature} (met {item.count} times in {out_of})",
                "failed",
                f"first met by:\n{item.first}",
                seconds / max(len(self.found), 1),
                case_id=f"diverges-{case_slug(item.signature)}",
                fingerprint=item.signature,
            )
            for item in self.found.values()
        ]


def describe_program(steps: Sequence[str], failure: str) -> str:
    """An example as it ran: its requests in order, then how the last one failed."""
    shown = [f"  {index}. {step}" for index, step in enumerate(steps, 1)]
    if len(shown) > 40:
        shown = [*shown[:10], f"  ... {len(shown) - 30} more ...", *shown[-20:]]
    return "\n".join([*shown, failure])
