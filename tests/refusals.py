"""The error a call must raise, for the tests' many "this is refused with that code" checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, overload

import pytest

from spec.codes import SpecError

E = TypeVar("E", bound=BaseException)


@overload
def refusal(call: Callable[[], object]) -> SpecError: ...
@overload
def refusal(call: Callable[[], object], error: type[E]) -> E: ...
def refusal(call: Callable[[], object], error: type[BaseException] = SpecError) -> BaseException:
    """What ``call`` raises, an ``error`` (a :class:`~spec.codes.SpecError` unless told); the test
    fails when it returns."""
    with pytest.raises(error) as caught:
        call()
    return caught.value
