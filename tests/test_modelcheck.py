"""The spec-level model checker (conformance/modelcheck.py): how far it goes at a small depth,
that its alphabet is taken whole, and that a spec broken by hand is caught with the shortest
counterexample, written as a vector the reference fails."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import spec.lineage.fork
import spec.lineage.repair
from conformance import builders as build
from conformance import modelcheck
from conformance.engine_model import model_request
from conformance.model import ModelStore
from conformance.modelcheck import ALPHABET, explore, path_to, start_search, write_vector
from conformance.report import CaseResult
from conformance.runner import run_vector
from conformance.subject import InProcessSubject
from reference.server import ReferenceSubject
from spec.lineage.repair import RepairScan
from spec.log.events import Event
from spec.protocol import Request

PREFIXES = (
    (),  # the whole graph, 4 deep: every action of session 0 but a fork at boundary 4
    ("turn@0", "turn-end@0", "bracket-start@0", "bracket-fail@0"),  # 5 events outside a turn
    ("bracket-start@0", "bracket-fail@0", "fork@0:1"),  # a child: the actions of session 1
)


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """The invariant cache remembers results per log object: a patched spec must not see them."""
    modelcheck.CACHE.clear()
    yield
    modelcheck.CACHE.clear()


def test_depth_two_reaches_a_known_number_of_states() -> None:
    search = explore(start_search(), max_depth=2)
    assert search.violation is None
    assert (search.distinct, search.generated, search.depth) == (32, 71, 2)


def test_every_action_of_the_alphabet_is_taken() -> None:
    taken: set[str] = set()
    for prefix, depth in zip(PREFIXES, (4, 1, 4), strict=True):
        search = explore(start_search(prefix), max_depth=depth)
        assert search.violation is None
        taken |= {action.name for action in ALPHABET if search.coverage.changed[action.name]}
    assert taken == {action.name for action in ALPHABET}


def test_the_report_names_the_actions_never_taken() -> None:
    search = explore(start_search(), max_depth=1)
    lines = list(modelcheck.coverage_lines(search))
    assert lines[-1].startswith("never taken: ") and "prune@0" in lines[-1]
    search.parts[0].coverage.changed.update(action.name for action in ALPHABET)
    assert (
        list(modelcheck.coverage_lines(search))[-1]
        == f"every action of the alphabet ({len(ALPHABET)}) was taken"
    )


def _replayed_on_the_reference(vector_path: Path) -> CaseResult:
    vector = json.loads(vector_path.read_text(encoding="utf-8"))
    subject = InProcessSubject(ReferenceSubject())
    try:
        capabilities = frozenset(vector["capabilities"])
        return run_vector(subject, vector, capabilities)
    finally:
        subject.close()


def test_closers_that_forget_a_compaction_end_are_caught(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Crash repair that closes everything but an open compaction: the shortest counterexample
    opens a bracket and makes it durable (two actions; no single action does both), and the
    vector, replayed on the reference with the spec unbroken, fails at the resume."""
    derive = spec.lineage.repair.derive_closers_after

    def forgetful(scan: RepairScan, last: Event, next_seq: int) -> tuple[Event, ...]:
        closers = derive(scan, last, next_seq)
        return tuple(event for event in closers if event.get("type") != "compaction/end")

    monkeypatch.setattr(spec.lineage.repair, "derive_closers_after", forgetful)
    search = explore(start_search(), max_depth=3)
    assert search.violation is not None
    violation, fingerprint = search.violation
    path = [ALPHABET[index].name for index in path_to(search, fingerprint)]
    assert violation.invariant == "resume after crash", violation
    assert len(path) == 2 and path[0] == "bracket-start@0", path
    written = write_vector(search, tmp_path)
    monkeypatch.undo()
    outcome = _replayed_on_the_reference(written)
    assert outcome.outcome == "failed", outcome
    assert "(resume)" in outcome.detail


def test_a_fork_seed_rule_that_allows_an_open_compaction_is_caught(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fork boundary inside an open compaction bracket, allowed: one action (the bracket's
    start) reaches a state where a boundary the fork rules accept gives a seed the seed rules
    refuse. The seed rules answer the fork with the code the fork rule would have
    (``OPEN_COMPACTION``), so the protocol cannot tell: the vector forks there and replays on the
    reference, broken or not."""
    monkeypatch.setattr(spec.lineage.fork, "validate_boundary_outside_open_compaction", lambda *args: None)
    search = explore(start_search(), max_depth=3)
    assert search.violation is not None
    violation, fingerprint = search.violation
    path = [ALPHABET[index].name for index in path_to(search, fingerprint)]
    assert (violation.invariant, path) == ("fork seed", ["bracket-start@0"]), violation
    written = write_vector(search, tmp_path)
    steps = json.loads(written.read_text(encoding="utf-8"))["steps"]
    assert steps[-1]["request"]["op"] == "fork" and steps[-1]["expect"]["code"] == "OPEN_COMPACTION"
    assert _replayed_on_the_reference(written).outcome == "passed"
    monkeypatch.undo()
    assert _replayed_on_the_reference(written).outcome == "passed"


def test_a_checkpointed_search_resumes_where_it_stopped(tmp_path: Path) -> None:
    whole = explore(start_search(), max_depth=3)
    first = explore(start_search(), max_states=40)
    modelcheck.save(first, tmp_path)
    resumed = explore(modelcheck.load(tmp_path), max_depth=3)
    assert (len(resumed.parents), resumed.generated) == (len(whole.parents), whole.generated)


def test_a_fingerprint_forgets_names_and_times_but_not_their_order() -> None:
    """Renamed sessions and messages and a shifted clock give the same fingerprint; a state
    that differs in what it holds does not."""

    def fingerprint(session: str, message: str, now: int, extra: bool = False) -> int:
        model = ModelStore()
        requests: list[Request] = [
            ("reset", {"storage": "file"}),
            ("clock", {"now": now}),
            ("create", {"id": session}),
            ("append", {"id": session, "type": "turn/start", "data": {"turn": 1}}),
            (
                "append",
                {
                    "id": session,
                    "type": "user/message",
                    "data": build.user_message(message),
                    "surfaceOp": "append",
                },
            ),
        ]
        if extra:
            requests.append(("flush", {"id": session}))
        for op, args in requests:
            model, expected = model_request(model, op, **args)
            assert expected.ok, expected
        return modelcheck.canonicalize(model)[0]

    standard = fingerprint("~s000", "~m000", 1_000)
    assert fingerprint("~s004", "~m007", 7_000) == standard
    assert fingerprint("~s000", "~m000", 1_000, extra=True) != standard
    assert fingerprint("~s000", "other", 1_000) != standard


def test_two_workers_find_what_one_process_finds() -> None:
    """The same states with the same parents and the same coverage, also when the workers stop
    at a deadline and the search goes on from there."""
    one = explore(start_search(), max_depth=3)
    modelcheck.CACHE.clear()
    two = explore(start_search(), max_depth=3, workers=2)
    assert two.parents == one.parents and two.coverage == one.coverage
    assert two.queue == one.queue > 0
    stopped = explore(start_search(), max_depth=3, workers=2, seconds=0.2)
    finished = explore(stopped, max_depth=3, workers=2)
    assert finished.parents == one.parents and finished.coverage == one.coverage


def test_two_workers_find_the_shortest_counterexample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec.lineage.fork, "validate_boundary_outside_open_compaction", lambda *args: None)
    search = explore(start_search(), max_depth=3, workers=2)
    assert search.violation is not None
    assert [ALPHABET[index].name for index in path_to(search, search.violation[1])] == ["bracket-start@0"]


class _CtrlCWhileWaiting:
    """A part's reply whose first wait is cut by Ctrl-C (as a SIGINT landing while the caller waits
    for the round), then answers."""

    def __init__(self, reply: Any) -> None:
        self.reply, self.cut = reply, False

    def result(self) -> Any:
        if not self.cut:
            self.cut = True
            raise KeyboardInterrupt
        return self.reply.result()


class _CutServer:
    def __init__(self, server: Any) -> None:
        self.server = server

    def call(self, name: str, *args: Any) -> Any:
        reply = self.server.call(name, *args)
        return _CtrlCWhileWaiting(reply) if name == "step" else reply


def test_ctrl_c_keeps_the_search_where_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a round: the parts finish it, what they sent is delivered, and the search
    goes on from there to the states of a run never interrupted. The Ctrl-C lands in the fourth
    round's wait, whatever the machine's speed (a timer raced the search on a fast machine)."""
    whole = explore(start_search(), max_depth=5)
    rounds = 0
    plain = modelcheck._round

    def fourth_round_cut(servers: Any, incoming: Any, batch: int) -> Any:
        nonlocal rounds
        rounds += 1
        return plain([_CutServer(server) for server in servers] if rounds == 4 else servers, incoming, batch)

    monkeypatch.setattr(modelcheck, "BATCH", 50)
    monkeypatch.setattr(modelcheck, "_round", fourth_round_cut)
    search = start_search()
    with pytest.raises(KeyboardInterrupt):
        explore(search, max_depth=5, workers=2)
    assert rounds == 4
    assert 0 < search.distinct < whole.distinct
    monkeypatch.setattr(modelcheck, "_round", plain)
    finished = explore(search, max_depth=5, workers=2)
    assert finished.parents == whole.parents and finished.coverage == whole.coverage


def test_a_search_stopped_mid_level_goes_on_with_another_number_of_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = explore(start_search(), max_depth=3)
    monkeypatch.setattr(modelcheck, "BATCH", 10)  # rounds of 10 states: the bound falls inside a level
    stopped = explore(start_search(), max_depth=3, max_states=60)
    assert any(part.found for part in stopped.parts) and any(part.frontier for part in stopped.parts)
    finished = explore(stopped, max_depth=3, workers=2)
    assert finished.parents == whole.parents and finished.coverage == whole.coverage
