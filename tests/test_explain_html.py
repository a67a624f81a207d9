"""``dsh-session explain --html``: one self-contained page that draws a forked and compacted log as
a timeline — the surface the model sees, each replace's shadowed span, the seed and the end-seed,
the fork lineage, open and closed turns, every violation in place — rendered by a real headless
Chromium (Debian's package) and photographed in the test run (issue 13)."""

from __future__ import annotations

import importlib.util
import re
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reference.cli import main

ROOT = Path(__file__).resolve().parent.parent


EXAMPLE = importlib.import_module("scripts.explain_example")


class Elements(HTMLParser):
    """Every element with an id: its classes and the text inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, tuple[set[str], list[str]]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag in ("meta", "br", "img", "link", "input"):
            return
        ident = found.get("id")
        if ident is not None:
            self.by_id[ident] = (set((found.get("class") or "").split()), [])
        self._open.append(ident)

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag not in ("meta", "br", "img", "link", "input"):
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for ident in self._open:
            if ident is not None:
                self.by_id[ident][1].append(data)

    def text(self, ident: str) -> str:
        return " ".join("".join(self.by_id[ident][1]).split())

    def classes(self, ident: str) -> set[str]:
        return self.by_id[ident][0]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    work = tmp_path_factory.mktemp("explain")
    log = EXAMPLE.build_forked_compacted_log(work / "sessions")
    out = work / "explain.html"
    with open(work / "stdout.txt", "w") as stdout:
        status = main(["explain", "--html", str(out), str(log)], out=stdout)
    assert status == 0, "the example log breaks no core rule"
    return out, out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def elements(page: tuple[Path, str]) -> Elements:
    parser = Elements()
    parser.feed(page[1])
    return parser


def test_the_page_is_self_contained_with_no_script_and_nothing_fetched(
    page: tuple[Path, str], elements: Elements
) -> None:
    assert [tag for tag, _ in elements.tags if tag in ("script", "link", "img", "iframe", "object")] == []
    for _, attrs in elements.tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), (name, value)
    assert "<style>" in page[1] and "url(" not in page[1] and "@import" not in page[1]


def test_the_page_shows_the_fork_lineage_and_the_seed(elements: Elements, page: tuple[Path, str]) -> None:
    assert "Forked from parent: the first 12 events (seedLength) are the seed" in " ".join(
        page[1].split()
    ).replace('<b class="mono">', "").replace("</b>", "").replace("<b>", "").replace("<code>", "").replace(
        "</code>", ""
    )
    assert all("seed" in elements.classes(f"seq-{seq}") for seq in range(12))
    assert "seed" not in elements.classes("seq-13")
    assert {"end-seed"} <= elements.classes("seq-12") and "end of the seed" in elements.text("seq-12")


def test_the_page_shows_each_replace_and_the_span_it_shadowed(elements: Elements) -> None:
    assert "replaces 18–18: shadows 18" in elements.text("seq-22")
    assert "shadowed" in elements.classes("seq-18") and "shadowed by seq 22" in elements.text("seq-18")
    assert "replaces 1–27: shadows 1, 3, 7, 9, 14, 16, 22, 23, 27" in elements.text("seq-34")
    assert "shadowed by seq 34" in elements.text("seq-22")


def test_the_page_shows_the_surface_as_the_model_sees_it(page: tuple[Path, str], elements: Elements) -> None:
    surface = page[1].split('<ol class="surface-list">', 1)[1].split("</ol>", 1)[0]
    assert [int(seq) for seq in re.findall(r'href="#seq-(\d+)"', surface)] == [34, 29, 37, 39]
    assert "4 nodes after replaceGeneration 2" in elements.text("surface")
    assert all("surface" in elements.classes(f"seq-{seq}") for seq in (34, 29, 37, 39))


def test_the_page_shows_open_and_closed_turns_and_the_violation_in_place(
    page: tuple[Path, str], elements: Elements
) -> None:
    text = " ".join(page[1].split())
    assert 'turn 4 <span class="state">seq 26 · closed at seq 31: completed' in text
    assert '<li class="turn open"' in text and 'turn 5 <span class="state">seq 36 · open: no turn/end' in text
    assert "tool-result-pairing (relational): tool/result for c9 with no prior tool/call" in elements.text(
        "seq-39"
    )
    assert "compaction" in elements.text("seq-33")


def chromium() -> str:
    found = EXAMPLE.find_chromium()
    if found is None:
        pytest.skip(
            "chromium is not installed and scripts/setup.sh could not install it (apt-get install chromium)"
        )
    return str(found)


def png_facts(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct bytes in the decoded scanlines of a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, width, height, idat = 8, 0, 0, b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_headless_chromium_renders_the_page_and_a_screenshot_is_taken(
    page: tuple[Path, str], tmp_path: Path
) -> None:
    chromium()
    png = tmp_path / "explain.png"
    EXAMPLE.screenshot(page[0], png)
    data = png.read_bytes()
    width, height, distinct = png_facts(data)
    assert (width, height) == (1280, 2000)
    assert len(data) > 50_000 and distinct > 64, "the screenshot is blank"


def test_chromium_reads_the_page_into_the_dom_it_was_written_as(page: tuple[Path, str]) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-chromium-") as profile:
        dom = subprocess.run(
            [
                chromium(),
                *EXAMPLE.CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--dump-dom",
                page[0].as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=True,
        ).stdout
    assert 'id="seq-39"' in dom and "The surface as the model sees it" in dom
    assert "tool-result-pairing" in dom


def long_log(path: Path, events: int, broken_at: int) -> Path:
    """A header, a turn that stays open, ``events - 1`` plugin events in it, and one turn/end
    naming the wrong turn at ``broken_at`` (a violation in the middle)."""
    lines = [
        '{"type":"session","version":4,"id":"long","createdAt":1000,"cwd":"/w","delegationDepth":0,"isSeeded":false}',
        '{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}',
    ]
    for seq in range(1, events):
        if seq == broken_at:
            lines.append(f'{{"type":"turn/end","seq":{seq},"time":1000,"data":{{"turn":7}}}}')
        else:
            lines.append(f'{{"type":"plugin/tick","seq":{seq},"time":1000,"data":{{}}}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_long_log_is_collapsed_to_its_ends_and_what_is_marked_in_between(tmp_path: Path) -> None:
    """Beyond 2 × DRAWN_EDGE_ROWS events the page draws both ends and the marked events of the
    middle; each run in between is one "not drawn" line, so the page's size is bounded."""
    from reference import explain_html

    edge = explain_html.DRAWN_EDGE_ROWS
    out = tmp_path / "long.html"
    count = 2 * edge + 3_000
    status = main(["explain", "--html", str(out), str(long_log(tmp_path / "long.jsonl", count, 2_500))])
    assert status == 0
    text = out.read_text(encoding="utf-8")
    drawn = set(map(int, re.findall(r'<li class="[^"]*" id="seq-(\d+)"', text)))
    assert drawn == set(range(edge)) | {2_500} | set(range(count - edge, count))
    assert f"{2_500 - edge} events not drawn (seqs {edge}–2499)" in text
    assert f"seqs 2501–{count - edge - 1}" in text
    assert "turn 1 (continued)" in text  # drawing resumes inside the open turn
    assert len(text) < 1_000 * (2 * edge + explain_html.DRAWN_MARKED_ROWS)  # about 1 KB per event drawn
    parser = Elements()
    parser.feed(text)
    assert "turn-end" in parser.text("seq-2500")
