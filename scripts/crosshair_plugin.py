"""CrossHair plugin (``--extra_plugin``) used by scripts/crosshair_budget.py: format a symbolic int
in an f-string as the placeholder ``<int>`` instead of realizing it.

Why: every rejection in spec/ builds its message with an f-string before it raises, and CrossHair
(0.0.113) realizes a symbolic int to format it. Each realization splits the path on that one value,
so the search spends its budget on rejection paths that differ only in a number inside a message
and rarely reaches the paths the contracts are about (the inverted-replace break of
``plan_replace`` went unfound for 20 s without this, and is found in under a second with it). The
messages are never part of a contract, so the analysis loses nothing; a counterexample that shows
an exception message may show ``<int>`` in it.

CrossHair executes this file inside a function, so the names it needs are bound in one function
and closed over. It reaches into CrossHair's patch registry, which has no public way to replace a
builtin patch; if that registry changes, the plugin says so on stderr and leaves CrossHair as it is.
"""

import sys


def _install_symbolic_int_formatting() -> None:
    try:
        from crosshair.core import _PATCH_REGISTRATIONS
        from crosshair.libimpl.builtinslib import SymbolicInt
        from crosshair.tracers import NoTracing
    except ImportError as error:
        print(f"crosshair_plugin: not installed ({error})", file=sys.stderr)
        return
    original = _PATCH_REGISTRATIONS.get(format)
    if original is None:
        print("crosshair_plugin: not installed (no patch for format() to wrap)", file=sys.stderr)
        return

    def format_without_realizing(value: object, format_spec: str = "") -> object:
        with NoTracing():  # type: ignore[no-untyped-call]
            placeholder = isinstance(value, SymbolicInt) and format_spec == ""
        return "<int>" if placeholder else original(value, format_spec)

    _PATCH_REGISTRATIONS[format] = format_without_realizing


_install_symbolic_int_formatting()
