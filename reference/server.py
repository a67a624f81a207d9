"""The reference's protocol server (conformance/PROTOCOL.md): :func:`main` runs
:class:`reference.subject.ReferenceSubject` as a stdio server (``python -m reference.server``): one
JSON request per line on stdin, one JSON response per line on stdout.

The subject itself, its ops grouped by area and its dispatch table, is :mod:`reference.subject`;
its names stay importable from here (``--subject reference.server:ReferenceSubject``). The
backends ``--backend`` picks are :mod:`reference.directory` (a real directory, when
``$CONFORMANCE_STORE_ROOT`` is set) and :mod:`reference.database_subjects`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from reference.database_subjects import make_subject
from reference.directory import subject_from_environment
from reference.subject import ENGINE_OPS, ReferenceSubject
from reference.subject.base import STORE_ROOT
from reference.subject.requests import Args, error_response
from spec.codes import SpecError
from spec.format.json_text import decode_json_text, encode_json_text
from spec.protocol import BAD_REQUEST, INTERNAL


def serve(subject: ReferenceSubject, lines: Callable[[], str], write: Callable[[str], object]) -> None:
    """The stdio loop: each line is one request; each answer is one line. A line that is not a
    JSON object is answered ``BAD_REQUEST`` (with ``rid`` null); a request whose handling or
    answer raises is answered ``INTERNAL`` with its rid, and the loop serves the next line."""
    while line := lines():
        if not line.strip():
            continue
        try:
            request = decode_json_text(line)
        except ValueError as error:
            response = error_response(None, BAD_REQUEST, f"request is not JSON: {error}")
        else:
            if isinstance(request, dict):
                try:
                    response = subject.handle(request)
                except Exception as error:
                    response = error_response(request.get("rid"), INTERNAL, repr(error))
            else:
                response = error_response(None, BAD_REQUEST, "request must be a JSON object")
        try:
            text = encode_json_text(response)
        except Exception as error:  # an answer outside the JSON domain (an infinity, a bad key)
            text = encode_json_text(
                error_response(response.get("rid"), INTERNAL, f"the answer is not JSON: {error!r}")
            )
        write(text + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m reference.server [--backend sqlite|postgres]``: serve the protocol on
    stdin/stdout until stdin closes. The default backend is the simulated filesystem with its crash
    seam, or the real directory ``$CONFORMANCE_STORE_ROOT`` when it is set
    (:mod:`reference.directory`); the database backends are :mod:`reference.database_subjects`."""
    parser = argparse.ArgumentParser(
        prog="python -m reference.server", description="serve the conformance protocol on stdin/stdout"
    )
    parser.add_argument(
        "--backend",
        choices=("simulated", "sqlite", "postgres"),
        default="simulated",
        help="where storage lives (default: the simulated filesystem, with the crash seam)",
    )
    backend = parser.parse_args(argv).backend
    subject: ReferenceSubject
    if backend == "simulated":
        try:
            subject = subject_from_environment()
        except NotADirectoryError as error:
            print(f"reference.server: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    else:
        try:
            subject = make_subject(backend)
        except (ValueError, SpecError) as error:
            print(f"reference.server: cannot start the {backend} backend: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    serve_stdio(subject)


def serve_stdio(subject: ReferenceSubject) -> None:
    """Serve the protocol for ``subject`` on this process's stdin and stdout until stdin closes."""
    with (
        open(sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape", closefd=False) as stdin,
        open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogatepass", closefd=False) as stdout,
    ):

        def write(text: str) -> None:
            stdout.write(text)
            stdout.flush()

        serve(subject, stdin.readline, write)


__all__ = ["ENGINE_OPS", "STORE_ROOT", "Args", "ReferenceSubject", "main", "serve", "serve_stdio"]


if __name__ == "__main__":
    main()
