"""The cluster path (``--cluster ADDRESS``, conformance/cluster.py): a local Dask scheduler with two
workers on loopback, started and stopped here; the model checker and ``dsh-session check`` run
through it and give what the embedded run gives."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.modelcheck import explore, path_to, start_search
from reference.cli import main as dsh_session

distributed = pytest.importorskip(
    "distributed", reason="the cluster path needs Dask (pip install distributed)"
)

LOGS = Path(__file__).resolve().parent.parent / "conformance" / "reference-files"


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A scheduler and two worker processes on 127.0.0.1: its address."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as local:
        yield str(local.scheduler_address)


def test_the_explorer_on_two_dask_workers_finds_what_the_embedded_run_finds(cluster: str) -> None:
    embedded = explore(start_search(), max_depth=3)
    remote = explore(start_search(), max_depth=3, cluster=cluster)
    assert len(remote.parts) == 2  # a part on each worker
    assert remote.parents == embedded.parents and remote.coverage == embedded.coverage
    assert (remote.distinct, remote.generated, remote.queue, remote.depth) == (
        embedded.distinct,
        embedded.generated,
        embedded.queue,
        embedded.depth,
    )
    assert remote.violation is None


def test_a_search_goes_on_on_the_cluster_from_where_the_embedded_one_stopped(cluster: str) -> None:
    """Two levels here, the third on the cluster: the states and the paths to them of a search
    run here whole."""
    first = explore(start_search(), max_depth=2)
    resumed = explore(first, max_depth=3, cluster=cluster)
    embedded = explore(start_search(), max_depth=3)
    assert resumed.parents == embedded.parents and resumed.violation is None
    deepest = [fingerprint for fingerprint in embedded.parents if len(path_to(embedded, fingerprint)) == 3]
    assert deepest and all(path_to(resumed, each) == path_to(embedded, each) for each in deepest)


def test_dsh_session_check_through_the_cluster_says_what_one_process_says(
    cluster: str, tmp_path: Path
) -> None:
    empty = tmp_path / "no-logs-here"
    empty.mkdir()
    for form in ("text", "json"):
        paths = [str(LOGS), str(empty)]
        one, many = io.StringIO(), io.StringIO()
        status = dsh_session(["check", "--format", form, *paths], out=one)
        assert dsh_session(["check", "--format", form, "--cluster", cluster, *paths], out=many) == status
        assert many.getvalue() == one.getvalue()
        assert (
            status != 0 and one.getvalue().count("\n") > 20
        )  # findings, unreadable logs and a folder without any


def test_dsh_session_check_in_two_processes_says_what_one_process_says() -> None:
    one, two = io.StringIO(), io.StringIO()
    status = dsh_session(["check", str(LOGS)], out=one)
    assert dsh_session(["check", "--jobs", "2", str(LOGS)], out=two) == status
    assert two.getvalue() == one.getvalue()
