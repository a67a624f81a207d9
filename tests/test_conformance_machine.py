"""The suite's Hypothesis machine (conformance/machine/): which machine a subject gets, its
profiles, and the failing program it reports, which names the sessions it created."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Sequence
from typing import Final

import pytest
from broken_subjects import ReplaceGenerationNotIncremented
from hypothesis.internal.constants_ast import Constants

from conformance.__main__ import EXIT_FAILED
from conformance.__main__ import main as conformance_main
from conformance.crash import SUBJECT_ARGUMENT
from conformance.divergence import Divergences
from conformance.exhaustive import check_exhaustive
from conformance.machine import (
    CrashMachine,
    SessionMachine,
    StorageMachine,
    check_machine,
    machine_for,
    machine_settings,
    run_machine,
)
from conformance.machine.engine import (
    EngineCrashMachine,
    EngineRules,
    EngineSessionMachine,
    EngineStorageMachine,
)
from conformance.machine.replay import (
    Recording,
    ReplayTokenError,
    Step,
    decode_recording,
    encode_recording,
    shrink,
)
from conformance.report import CaseResult, Options
from conformance.subject import InProcessSubject, StdioSubject, Subject
from reference.server import ReferenceSubject


def test_a_subject_gets_the_machine_its_capabilities_allow_and_the_storage_that_goes_with_it() -> None:
    chosen = [
        machine_for(caps) for caps in (("core",), ("core", "storage"), ("core", "storage", "crash-seam"))
    ]
    assert chosen == [SessionMachine, StorageMachine, CrashMachine]
    assert [machine.storage for machine in chosen] == ["none", "memory", "file"]


def test_the_machine_draws_no_literal_from_the_project_s_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis's local-constants pool (literals of every loaded project module) is empty while
    the machine runs, and back afterwards; without the internal the machine refuses to run."""
    from hypothesis.internal.conjecture import providers

    from conformance.machine import family

    seen: list[object] = []

    def record(*_: object, **__: object) -> None:
        seen.append(providers._get_local_constants())

    monkeypatch.setattr(family, "run_state_machine_as_test", record)
    before = providers._get_local_constants
    run_machine(InProcessSubject(ReferenceSubject()), ("core",), "ci")
    assert len(seen) == 1 and seen[0] == Constants(), seen
    assert providers._get_local_constants is before
    monkeypatch.delattr(providers, "_get_local_constants")
    with pytest.raises(RuntimeError, match="cannot pin Hypothesis's local constants"):
        run_machine(InProcessSubject(ReferenceSubject()), ("core",), "ci")


def test_each_machine_extends_the_one_before_it() -> None:
    assert issubclass(CrashMachine, StorageMachine) and issubclass(StorageMachine, SessionMachine)


def test_the_ci_profile_is_deterministic_and_the_thorough_one_is_longer() -> None:
    ci, thorough = machine_settings("ci"), machine_settings("thorough")
    assert ci.derandomize and ci.database is None
    assert thorough.max_examples * thorough.stateful_step_count > ci.max_examples * ci.stateful_step_count


def test_a_failing_run_prints_a_program_that_names_the_sessions_it_created() -> None:
    outcome = run_machine(InProcessSubject(ReplaceGenerationNotIncremented()), ("core",), "ci")
    assert outcome.failure is not None
    program = outcome.failure.splitlines()
    created = [line for line in program if re.match(r"sessions_\d+ = state\.create\w*\(", line)]
    targeted = [line for line in program if re.search(r"\bsession=sessions_\d+\b", line)]
    assert created and targeted, outcome.failure
    assert not [line for line in program if re.search(r"\b(session|source|donor)=\d", line)]


BROKEN: Final = "--subject broken_subjects:ReplaceGenerationNotIncremented"


@pytest.fixture(scope="module")
def broken_cases() -> dict[str, list[CaseResult]]:
    """The machine's and the exhaustive checker's cases on one broken subject (core only), each
    family run once for the tests below."""
    options = Options(
        profile="ci",
        capabilities=frozenset({"core"}),
        extra={SUBJECT_ARGUMENT: BROKEN},
        exhaustive_depth=4,  # what is reported of a disagreement, not how deep the search goes
    )
    return {
        family: check(InProcessSubject(ReplaceGenerationNotIncremented()), options)
        for family, check in (("machine", check_machine), ("exhaustive", check_exhaustive))
    }


def test_a_failure_under_ci_says_it_was_not_shrunk(broken_cases: dict[str, list[CaseResult]]) -> None:
    main, *divergences = broken_cases["machine"]
    assert main.outcome == "failed" and main.key == "machine/agrees"
    assert (
        "not shrunk by Hypothesis under the ci profile; --profile thorough shrinks the first" in main.detail
    )
    assert divergences and all(case.outcome == "failed" for case in divergences)


def test_after_a_disagreement_the_machine_goes_on_with_its_other_examples(
    broken_cases: dict[str, list[CaseResult]],
) -> None:
    """A subject that differs in one op only: every example still runs, the ones that never reach
    that op agree, and the disagreement is one case of its own, named by how the answer differed."""
    main, *divergences = broken_cases["machine"]
    assert "runs stopped at one" in main.detail
    stopped = int(main.detail.split("; ")[1].split(" of ")[0])
    total = int(main.detail.split(" of ")[1].split(" runs")[0])
    assert 0 < stopped < total and total >= 100
    assert len({case.key for case in divergences}) == len(divergences)
    assert all(case.key.startswith("machine/diverges-") for case in divergences)
    assert all("first met by:" in case.detail and "append" in case.detail for case in divergences)


def test_a_subject_with_an_engine_capability_gets_the_engine_rules_on_its_machine() -> None:
    chosen = [
        machine_for(caps)
        for caps in (
            ("core", "prune"),
            ("core", "storage", "compaction"),
            ("core", "storage", "crash-seam", "spill"),
        )
    ]
    assert chosen == [EngineSessionMachine, EngineStorageMachine, EngineCrashMachine]
    assert [issubclass(machine, EngineRules) for machine in chosen] == [True, True, True]
    assert issubclass(EngineCrashMachine, CrashMachine)


@pytest.mark.parametrize("over", ["in process", "stdio"])
def test_the_reference_passes_the_engine_machine_under_ci_well_within_a_minute(over: str) -> None:
    """Every engine rule ran (compactions, prunes, spills, overflows, checkpoints, the cache after a
    power cut), the whole-log checker judged the engine's logs, and the run took under 45 s."""
    subject: Subject = (
        InProcessSubject(ReferenceSubject())
        if over == "in process"
        else StdioSubject(f"{sys.executable} -m reference.server", timeout=60)
    )
    try:
        outcome = run_machine(subject, ReferenceSubject.capabilities, "ci", divergences=Divergences())
    finally:
        subject.close()
    assert outcome.failure is None and outcome.storage == "file"
    ran = {outcome.split(" ")[0] for outcome, count in outcome.stats.outcomes.items() if count}
    assert ran >= {"compact", "compact_region", "compact_if_needed", "prune", "overflow", "spill"}
    assert ran >= {"checkpoint", "fail_next", "state_of_stored", "project", "crash"}
    assert outcome.stats.outcomes["whole-log checks"] >= 50
    assert (
        outcome.stats.outcomes.get("compact ok", 0) >= 10
        and outcome.stats.outcomes["crash after flush"] >= 10
    )
    assert outcome.stats.outcomes.get("checkpoint DURABILITY_CHECKPOINT_FAILED", 0) >= 5
    assert outcome.stats.seconds < 45, outcome.stats.seconds


def replay_of(detail: str) -> tuple[int, int, list[str]]:
    """A disagreement's replay: how many steps it was shrunk to, out of how many, and the command."""
    shrunk = re.search(r"shrunk to (\d+) of (\d+) steps", detail)
    command = re.search(r"^replay: python -m conformance (.*)$", detail, re.MULTILINE)
    assert shrunk and command, detail
    return int(shrunk[1]), int(shrunk[2]), shlex.split(command[1])


@pytest.mark.parametrize("family", ["machine", "exhaustive"])
def test_a_disagreement_shows_a_shrunk_replay_that_fails_the_subject_and_passes_the_reference(
    family: str, broken_cases: dict[str, list[CaseResult]]
) -> None:
    """The printed command replays the shrunk steps: the broken subject fails them (so the shrunk
    sequence still fails), the reference passes them, and they are no more than were recorded."""
    _, *divergences = broken_cases[family]
    assert divergences
    for case in divergences:
        shrunk, recorded, argv = replay_of(case.detail)
        assert 0 < shrunk <= recorded
        assert argv[:4] == [*BROKEN.split(), "--families", family] and argv[4] == "--replay"
        assert len(decode_recording(argv[5]).steps) == shrunk
        assert conformance_main(argv) == EXIT_FAILED
        assert conformance_main(["--subject", "reference.server:ReferenceSubject", *argv[2:]]) == 0


def test_shrinking_drops_every_step_the_failure_does_not_need() -> None:
    steps = [(f"op{index}", {}) for index in range(10)]

    def needs_three_and_seven(kept: Sequence[Step]) -> bool:
        return {"op3", "op7"} <= {op for op, _ in kept}

    assert shrink(steps, needs_three_and_seven, seconds=10) == [("op3", {}), ("op7", {})]


def test_a_recording_survives_its_token_and_a_token_that_is_not_one_is_refused() -> None:
    recording = Recording(
        "machine", "file", (("append", {"id": "s0", "data": {"text": "\ud800 \U0001f600"}}),)
    )
    assert decode_recording(encode_recording(recording)) == recording
    with pytest.raises(ReplayTokenError):
        decode_recording("not-a-token")
