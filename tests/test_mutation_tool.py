"""The mutation tool (scripts/mutation.py, cosmic-ray) on one small spec rule: a mutant the vectors
kill is reported killed, an equivalent one survives, and the reviewed file turns it equivalent; a
mutant of the Postgres store, which no vector case reaches, is recorded unreached without running."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec

from scripts import mutation

MODULE = "spec/log/provenance.py"
RULE = "decode_cited_seqs"
LINE = 38  # if len(raw) == 0 and kind != ASSISTANT_MESSAGE:
KILLED = "core/ReplaceComparisonOperator_Eq_NotEq"  # len(raw) != 0: every non-empty citation rejected
EQUIVALENT = "core/ReplaceComparisonOperator_Eq_LtE"  # len(raw) <= 0: a length is never negative
UNREACHED = ("reference/persistence/postgres.py", "_take_lock", "core/ReplaceComparisonOperator_LtE_Lt")


def test_a_killed_and_a_surviving_mutant_are_reported_as_such(tmp_path: Path) -> None:
    assert "len(raw) == 0" in (mutation.ROOT / MODULE).read_text(encoding="utf-8").splitlines()[LINE - 1]
    session = tmp_path / "session.sqlite"
    mutation.open_session(session, [MODULE, UNREACHED[0]], fresh=True)

    def wanted(spec: MutationSpec) -> bool:
        if Path(spec.module_path).as_posix() == UNREACHED[0]:  # if self.lock_wait_ms <= 0:
            return bool((spec.definition_name, spec.operator_name) == UNREACHED[1:])
        # the first comparison of the line (len(raw) == 0), not the second (kind != ...)
        return bool(spec.definition_name == RULE and spec.start_pos[0] == LINE and spec.start_pos[1] < 20)

    mutation.keep(
        session, lambda spec: wanted(spec) and spec.operator_name in {KILLED, EQUIVALENT, UNREACHED[2]}
    )
    mutation.run_lane(
        session, "fast", (), jobs=2, timeout=120, cases=["provenance/*"], limit=None,
        coverage_path=tmp_path / "coverage.json",
    )  # fmt: skip

    everything = mutation.read_mutants(session)
    far = next(m for m in everything if m.module == UNREACHED[0])
    assert far.lanes["fast"] == ("unreached", 0.0)
    assert (far.before, far.after) == ("if self.lock_wait_ms <= 0:", "if self.lock_wait_ms < 0:")
    assert mutation.final_outcome(far, {}) == "survived"
    assert "fast (no case reaches it)" in mutation.render([far], {})
    # a later lane takes it up: the drt lane's pending list holds it
    assert mutation.lane_rows(session)[far.job_id]["fast"][0] in mutation.SURVIVING

    mutants = {m.operator: m for m in everything if m.module == MODULE}
    assert set(mutants) == {KILLED.removeprefix("core/"), EQUIVALENT.removeprefix("core/")}
    killed, equivalent = mutants[KILLED.removeprefix("core/")], mutants[EQUIVALENT.removeprefix("core/")]
    assert killed.lanes["fast"][0] == "killed"
    assert equivalent.lanes["fast"][0] == "survived"
    assert (equivalent.before, equivalent.after) == (
        "if len(raw) == 0 and kind != ASSISTANT_MESSAGE:",
        "if len(raw) <= 0 and kind != ASSISTANT_MESSAGE:",
    )

    untriaged = mutation.render(list(mutants.values()), {})
    assert "| 2 | 1 | 0 | 1 | 0 |" in untriaged  # mutants, killed, timeout, survived, equivalent
    assert "untriaged" in untriaged

    reviewed = tmp_path / "equivalents.json"
    entry = {"module": MODULE, "rule": RULE, "before": equivalent.before, "after": equivalent.after}
    entry |= {"verdict": "equivalent", "reason": "a length is never negative"}
    reviewed.write_text(json.dumps({"mutants": [entry]}), encoding="utf-8")
    triaged = mutation.render(list(mutants.values()), mutation.read_triage(reviewed))
    assert "| 2 | 1 | 0 | 0 | 1 |" in triaged
    assert "a length is never negative" in triaged


def test_a_session_is_resumed_for_fewer_files_and_again_drops_only_survivors(tmp_path: Path) -> None:
    session = tmp_path / "session.sqlite"
    mutation.open_session(session, [MODULE, UNREACHED[0]], fresh=True)
    jobs = [m.job_id for m in mutation.read_mutants(session) if m.module == MODULE][:3]
    far = next(m.job_id for m in mutation.read_mutants(session) if m.module == UNREACHED[0])
    with sqlite3.connect(session) as db:
        db.executemany(
            "INSERT INTO lane_results VALUES (?, 'fast', ?, 1.0)",
            [(jobs[0], "killed"), (jobs[1], "survived"), (jobs[2], "unreached"), (far, "survived")],
        )
    mutation.open_session(session, [MODULE], fresh=False)  # a part of the session: resumed, kept
    assert len(mutation.lane_rows(session)) == 4
    rules = {m.job_id: m.rule for m in mutation.read_mutants(session)}
    other = next(r for r in sorted(set(rules.values()) - {rules[jobs[1]], rules[jobs[2]], "(module)"}))
    assert (
        mutation.forget_survivors(session, ["fast"], [MODULE], rules=[other]) == 0
    )  # --again --rule elsewhere
    assert mutation.forget_survivors(session, ["fast"], [MODULE]) == 2
    rows = mutation.lane_rows(session)
    assert rows[jobs[0]]["fast"][0] == "killed" and rows[far]["fast"][0] == "survived"
    assert jobs[1] not in rows and jobs[2] not in rows


def test_a_module_changed_since_the_session_made_its_mutants_has_them_made_again(tmp_path: Path) -> None:
    session = tmp_path / "session.sqlite"
    mutation.open_session(session, [MODULE, UNREACHED[0]], fresh=True)
    made = {m.job_id: m for m in mutation.read_mutants(session)}
    with sqlite3.connect(session) as db:
        db.executemany(
            "INSERT INTO lane_results VALUES (?, 'fast', 'survived', 1.0)", [(job,) for job in made]
        )
        # the session as made from an older text of MODULE, one line shorter above every mutant;
        # the other module's recorded digest differs too, but its mutants are the same
        db.execute(
            "UPDATE mutation_specs SET start_pos_row = start_pos_row - 1, end_pos_row = end_pos_row - 1 "
            "WHERE module_path = ?",
            (MODULE,),
        )
        old = {MODULE: "an older text", UNREACHED[0]: "another older text"}
        db.execute("UPDATE mutation_meta SET value = ? WHERE key = 'sources'", (json.dumps(old),))
    mutation.open_session(session, [MODULE, UNREACHED[0]], fresh=False)

    now = mutation.read_mutants(session)
    remade = [m for m in now if m.module == MODULE]
    assert len(remade) == len([m for m in made.values() if m.module == MODULE])
    assert not {m.job_id for m in remade} & set(made)  # new mutants, at the lines the module has now
    assert {(m.operator, m.line) for m in remade} == {
        (m.operator, m.line) for m in made.values() if m.module == MODULE
    }
    assert all(not m.lanes for m in remade)  # pending: judged again
    kept = [m for m in now if m.module == UNREACHED[0]]
    assert kept and all(m.job_id in made and m.lanes["fast"][0] == "survived" for m in kept)
    with sqlite3.connect(session) as db:
        sources = json.loads(
            db.execute("SELECT value FROM mutation_meta WHERE key = 'sources'").fetchone()[0]
        )
    assert sources == mutation.source_digests([MODULE, UNREACHED[0]])
    mutation.open_session(session, [MODULE], fresh=False)  # nothing changed since: nothing made again
    assert {m.job_id for m in mutation.read_mutants(session)} == {m.job_id for m in now}


def test_a_module_no_longer_in_the_scope_has_its_mutants_dropped(tmp_path: Path) -> None:
    """A module moved out of the scope (as the PostgreSQL test cluster went to scripts/): its
    mutants and their results leave the session, the others stay as they were."""
    session = judged_session(tmp_path / "session.sqlite", [MODULE, UNREACHED[0]], "survived")
    made = mutation.read_mutants(session)
    with sqlite3.connect(session) as db:
        db.execute(
            "UPDATE mutation_specs SET module_path = 'reference/persistence/moved_away.py' WHERE module_path = ?",
            (UNREACHED[0],),
        )
    mutation.open_session(session, [MODULE], fresh=False)
    now = mutation.read_mutants(session)
    assert now and {m.module for m in now} == {MODULE}
    assert {m.job_id for m in now} == {m.job_id for m in made if m.module == MODULE}
    assert set(mutation.lane_rows(session)) == {m.job_id for m in now}
    with sqlite3.connect(session) as db:
        files = json.loads(db.execute("SELECT value FROM mutation_meta WHERE key = 'files'").fetchone()[0])
    assert "reference/persistence/moved_away.py" not in files


def test_a_later_lane_runs_only_the_units_that_reach_a_mutant(tmp_path: Path) -> None:
    """The drt lane with a map of one traced unit (pure-drt's encode_project_key part): a mutant of
    that function runs the unit on a mutated subject and is killed; a mutant the unit never
    executes is recorded unreached without running."""
    naming = "spec/format/naming.py"
    line = 72  # if cwd == "": made != every cwd but the empty one is refused
    assert 'if cwd == "":' in (mutation.ROOT / naming).read_text(encoding="utf-8").splitlines()[line - 1]
    key, said, seconds, found = mutation.trace_unit(("drt", "pure-drt#12"))
    assert line in found[naming] and UNREACHED[0] not in found
    assert said == ["passed: 1"]
    units = {key: {"verdict": said, "seconds": seconds, "lines": found}}
    coverage = tmp_path / "coverage-drt.json"
    coverage.write_text(json.dumps({"code": mutation.suite_digest(), "units": units}), encoding="utf-8")
    session = tmp_path / "session.sqlite"
    mutation.open_session(session, [naming, UNREACHED[0]], fresh=True)
    mutation.keep(
        session,
        lambda spec: (
            (Path(spec.module_path).as_posix(), spec.definition_name, spec.operator_name) == UNREACHED
            or (spec.start_pos[0] == line and spec.operator_name == "core/ReplaceComparisonOperator_Eq_NotEq")
        ),
    )
    mutation.run_lane(session, "drt", (), jobs=1, timeout=300, cases=[], limit=None, unit_coverage=coverage)
    lanes = {m.module: m.lanes["drt"] for m in mutation.read_mutants(session)}
    assert lanes[naming][0] == "killed"
    assert lanes[UNREACHED[0]] == ("unreached", 0.0)


def fake_worker(marks: Path, connection: Any) -> None:
    """A worker of :func:`mutation.judged` whose task ``(job, how)`` says how it fares the first
    time it is handed out: ``die`` kills it, ``hang`` blocks it for ever on a lock (a futex, as a
    queue's lock held by a dead worker did), ``always`` dies every time; else it answers."""
    while (task := connection.recv()) is not None:
        job, how = task
        first = not (marks / job).exists()
        (marks / job).touch()
        if how == "always" or (how == "die" and first):
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "hang" and first:
            lock = threading.Lock()
            lock.acquire()
            lock.acquire()
        connection.send((job, f"judged by {os.getpid()}", 0.0))


def test_a_worker_that_dies_or_hangs_is_replaced_and_its_mutant_judged_again(tmp_path: Path) -> None:
    """A worker killed mid-mutant, or stuck on a lock, cost the old run everything: it stopped (or,
    the stuck one alive, waited for ever). Each worker now has its own pipe and one task at a time:
    the dead or hung one is replaced, its task handed out again, the others' results kept; a task
    whose workers die every time is given up after TRIES and named, without stopping the rest."""
    context = multiprocessing.get_context("fork")  # the test's own workers: no pickling needed
    started: list[tuple[int, bool]] = []

    def start(index: int, again: bool) -> tuple[Any, Any]:
        started.append((index, again))
        ours, theirs = context.Pipe()
        process = context.Process(target=fake_worker, args=(tmp_path, theirs))
        process.start()
        theirs.close()
        return process, ours

    tasks = [("a", "ok"), ("b", "die"), ("c", "hang"), ("d", "always"), ("e", "ok"), ("f", "ok")]
    lost: list[Any] = []
    begun = time.monotonic()
    results = list(mutation.judged(tasks, start, 2, limit=3.0, lost=lost, wait=0.2))
    assert sorted(job for job, _, _ in results) == ["a", "b", "c", "e", "f"]
    assert lost == [("d", "always")]
    # two workers, replaced after b's death, c's hang and d's two deaths
    assert started[:2] == [(0, False), (1, False)] and len(started) == 6
    assert all(again for _, again in started[2:])
    assert time.monotonic() - begun < 60


def test_a_case_glob_choosing_none_of_a_lanes_cases_stops_the_run_instead_of_recording_unreached(
    tmp_path: Path,
) -> None:
    """``--lanes fast,stateful --case crash#*``: the glob names stateful units, no vector case; the
    fast lane must refuse rather than record every pending mutant unreached without running it."""
    session = tmp_path / "session.sqlite"
    mutation.open_session(session, [MODULE], fresh=True)
    mutation.keep(session, lambda spec: spec.start_pos[0] == LINE and spec.operator_name == KILLED)
    with pytest.raises(SystemExit, match="chooses none"):
        mutation.run_lane(session, "fast", (), jobs=1, timeout=60, cases=["crash#*"], limit=None)
    assert mutation.lane_rows(session) == {}


def test_the_ledger_keeps_a_sessions_results_for_a_new_session_and_the_report(tmp_path: Path) -> None:
    """A session saved into the ledger is what a session made anew (another machine, a fresh
    clone) starts from and what the report is made of; a later session's word replaces the
    ledger's for the lanes it ran only; a module whose mutants moved since is judged anew."""
    files = [MODULE, UNREACHED[0]]
    session, ledger = tmp_path / "session.sqlite", tmp_path / "ledger.json"
    mutation.open_session(session, files, fresh=True)
    mutation.skip_annotations(session)
    judged = [m for m in mutation.read_mutants(session) if not m.skipped][:6]
    outcomes = ["killed", "survived", "unreached", "timeout", "incompetent", "survived"]
    with use_db(str(session), WorkDB.Mode.open) as work_db:
        for index, (m, outcome) in enumerate(zip(judged, outcomes, strict=True)):
            result = mutation.result_of(outcome, f"line {index}", f"mutated {index}")
            mutation.record(session, work_db, m.job_id, "fast", result, 0.5)
        mutation.record(session, work_db, judged[1].job_id, "drt", mutation.result_of("killed", "", ""), 9.0)

    def seen(mutants: list[mutation.Mutant]) -> list[tuple[Any, ...]]:
        """What the report reads of each mutant (a killed one's lines are not kept)."""
        return sorted((m.module, m.line, m.operator, m.rule, sorted(m.lanes.items()), m.skipped,
                       () if mutation.decisive(m.lanes) else (m.before, m.after)) for m in mutants)  # fmt: skip

    assert mutation.save_to_ledger(session, ledger) == sorted(files)
    made = mutation.read_mutants(session)
    survivor = next(m for m in made if m.job_id == judged[5].job_id)
    assert (survivor.before, survivor.after) == ("line 5", "mutated 5")
    again = tmp_path / "again.sqlite"
    mutation.open_session(again, files, fresh=False, ledger=ledger)
    assert seen(mutation.read_mutants(again)) == seen(made)
    assert seen(mutation.ledger_mutants(ledger, files)) == seen(made)
    assert mutation.render(mutation.ledger_mutants(ledger, files), {}) == mutation.render(made, {})

    # a later session, made without the ledger, judges that survivor in the fast lane only: the
    # ledger takes its word for that lane and keeps the drt result it had
    with use_db(str(session), WorkDB.Mode.open) as work_db:
        place = next(
            mutation.place_of(i.mutations[0]) for i in work_db.work_items if i.job_id == judged[1].job_id
        )
    later = tmp_path / "later.sqlite"
    mutation.open_session(later, files, fresh=True)
    with use_db(str(later), WorkDB.Mode.open) as work_db:
        job = next(i.job_id for i in work_db.work_items if mutation.place_of(i.mutations[0]) == place)
        mutation.record(later, work_db, job, "fast", mutation.result_of("killed", "", ""), 0.7)
    mutation.save_to_ledger(later, ledger)
    lanes = next(m.lanes for m in mutation.ledger_mutants(ledger, files) if "drt" in m.lanes)
    assert lanes == {"fast": ("killed", 0.7), "drt": ("killed", 9.0)}
    kept = [m for m in mutation.ledger_mutants(ledger, files) if m.lanes == {"fast": ("survived", 0.5)}]
    assert [(m.before, m.after) for m in kept] == [("line 5", "mutated 5")]

    # the ledger as judged on an older text of MODULE, whose mutants sat one line higher
    text = json.loads(ledger.read_text(encoding="utf-8"))
    text["modules"][MODULE]["sha256"] = "an older text"
    for row in text["modules"][MODULE]["mutants"]:
        row["at"][0] -= 1
    ledger.write_text(json.dumps(text), encoding="utf-8")
    report = mutation.ledger_mutants(ledger, files)
    assert all(not m.lanes for m in report if m.module == MODULE)  # pending
    assert any(m.lanes for m in report if m.module == UNREACHED[0])
    fresh = tmp_path / "fresh.sqlite"
    mutation.open_session(fresh, files, fresh=False, ledger=ledger)
    assert {m.module for m in mutation.read_mutants(fresh) if m.lanes} == {UNREACHED[0]}


def judged_session(path: Path, files: list[str], outcome: str) -> Path:
    """A session of ``files`` made anew, every mutant's fast lane judged ``outcome``."""
    mutation.open_session(path, files, fresh=True)
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO lane_results VALUES (?, 'fast', ?, 1.0)",
            [(m.job_id, outcome) for m in mutation.read_mutants(path)],
        )
    return path


def test_a_save_of_named_modules_leaves_the_others_as_the_ledger_holds_them(tmp_path: Path) -> None:
    """A run saves only the modules it judged: a session holding an older word on another module
    (a survivor that another tree's session has since killed) does not overwrite the ledger's."""
    ledger = tmp_path / "ledger.json"
    mutation.save_to_ledger(judged_session(tmp_path / "newer.sqlite", [UNREACHED[0]], "killed"), ledger)
    older = judged_session(tmp_path / "older.sqlite", [UNREACHED[0], MODULE], "survived")
    assert mutation.save_to_ledger(older, ledger, modules=[MODULE]) == [MODULE]
    kept = [m.lanes for m in mutation.ledger_mutants(ledger, [UNREACHED[0]])]
    assert kept and all(lanes == {"fast": ("killed", 1.0)} for lanes in kept)
    assert all(m.lanes == {"fast": ("survived", 1.0)} for m in mutation.ledger_mutants(ledger, [MODULE]))


def test_a_run_naming_a_module_the_session_lacks_adds_it_and_keeps_the_others(tmp_path: Path) -> None:
    """A session of one module, resumed for another: the other is added (its results from the
    ledger), and what the session held stays."""
    ledger = tmp_path / "ledger.json"
    mutation.save_to_ledger(judged_session(tmp_path / "session.sqlite", [UNREACHED[0]], "killed"), ledger)
    other = tmp_path / "other.sqlite"
    mutation.open_session(other, [MODULE], fresh=True)
    held = mutation.read_mutants(other)[0].job_id
    with sqlite3.connect(other) as db:
        db.execute("INSERT INTO lane_results VALUES (?, 'fast', 'survived', 1.0)", (held,))
    mutation.open_session(other, [UNREACHED[0]], fresh=False, ledger=ledger)
    now = mutation.read_mutants(other)
    assert {m.module for m in now} == {MODULE, UNREACHED[0]}
    assert mutation.lane_rows(other)[held]["fast"][0] == "survived"
    assert all(m.lanes == {"fast": ("killed", 1.0)} for m in now if m.module == UNREACHED[0])


def test_the_committed_report_is_made_from_the_ledger_and_the_tree_as_it_is() -> None:
    """docs/mutation.md is the ledger's report on this tree: a module edited since its mutants were
    judged shows them pending, never the results of a text that is gone."""
    made = mutation.render(mutation.ledger_mutants(), mutation.read_triage())
    assert made == mutation.REPORT.read_text(encoding="utf-8"), (
        "docs/mutation.md is stale: run bash scripts/mutation.sh report --markdown docs/mutation.md"
    )


def test_ci_judges_the_lines_changed_since_the_ledger_was_saved_and_every_survivor_is_reviewed(
    tmp_path: Path,
) -> None:
    """CI's mutation lane (issue 26): the mutants of the scope's lines changed since the commit that
    last saved the ledger (a change no saved run judged) run on the fast lane, and each one is
    killed or has a reviewed verdict in docs/mutation-equivalents.json. With no such line the lane
    has nothing to judge: the test is skipped and says so, it does not pass."""
    if not (mutation.ROOT / ".git").exists():
        pytest.skip("not a git checkout: no change to find, the fast lane judged nothing")
    base = mutation.ledger_base()
    changed = mutation.changed_lines(base)
    if not changed:
        pytest.skip(
            f"no line of the mutation scope changed since {base[:12]} (the ledger's last save): nothing to judge"
        )
    session, report = tmp_path / "changed.sqlite", tmp_path / "changed.md"
    command = ["run", "--changed", base, "--session", str(session), "--markdown", str(report), "--jobs", "2"]
    done = subprocess.run([sys.executable, "-m", "scripts.mutation", *command], cwd=mutation.ROOT,
                          capture_output=True, text=True, timeout=3600)  # fmt: skip
    mutants, triage = mutation.read_mutants(session), mutation.read_triage()
    outcomes = {m.job_id: mutation.final_outcome(m, triage) for m in mutants}
    assert mutants and "pending" not in outcomes.values(), (
        f"the fast lane did not judge every mutant:\n{done.stderr[-2000:]}"
    )
    unreviewed = sorted(f"{m.module}:{m.line} {m.operator} -> {m.after!r}" for m in mutants
                        if outcomes[m.job_id] == "survived" and mutation.review_of(m, triage) is None)  # fmt: skip
    assert not unreviewed, (
        f"{len(unreviewed)} mutants of lines changed since {base[:12]} survive the fast lane with no review: kill them "
        "(a vector, an edge) or review them in docs/mutation-equivalents.json, then save a run into the ledger:\n"
        + "\n".join(unreviewed[:40])
    )
