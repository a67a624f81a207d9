"""dsh-session-spec: the executable specification of the DSH session event log.

Every rule is a typed pure function with a docstring that states it; every rejection is a
:class:`spec.codes.SpecError` with a stable code. The README's "short tour" gives a reading order.
"""

from spec.codes import Code, SpecError

__all__ = ["Code", "SpecError"]
