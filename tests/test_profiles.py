"""The generated families on the reference, in process, under the profile HYPOTHESIS_PROFILE names
(``ci`` by default): ``HYPOTHESIS_PROFILE=thorough`` draws pure-drt's thorough budget (1000 inputs
per function) and runs the machine's long, random, shrinking profile."""

from __future__ import annotations

import os

from conformance.machine import check_machine
from conformance.pure_drt import BUDGETS, check_pure_drt
from conformance.report import Options
from conformance.runner import hello
from conformance.subject import InProcessSubject
from reference.server import ReferenceSubject
from spec.wire import WIRE_FUNCTIONS

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def reference_options() -> tuple[InProcessSubject, Options]:
    subject = InProcessSubject(ReferenceSubject())
    said = hello(subject)
    return subject, Options(profile=PROFILE, capabilities=said.capabilities, target=said.target)


def test_the_reference_agrees_with_the_specification_on_every_function() -> None:
    every = check_pure_drt(*reference_options())
    assert all(r.outcome == "passed" for r in every), [(r.name, r.detail[:800]) for r in every]
    results = [r for r in every if r.rule in WIRE_FUNCTIONS]  # then the typed fields' edges
    assert [r.rule for r in results] == list(WIRE_FUNCTIONS)
    assert all(r.outcome == "passed" for r in results), [(r.name, r.detail[:800]) for r in results]
    budget = BUDGETS.get(PROFILE, BUDGETS["ci"])
    assert all(f"a budget of {budget}" in r.detail for r in results)


def test_the_reference_passes_the_machine() -> None:
    results = check_machine(*reference_options())
    assert results and all(r.outcome == "passed" for r in results), [
        (r.name, r.detail[:1500]) for r in results
    ]
