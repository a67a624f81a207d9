"""The cases the conformance vectors are generated from, one module per family.

``conformance/cases/<family>.py`` (``tool_rewrite.py`` for ``tool-rewrite``; ``storage/`` is a
package of five parts) produces the cases of ``conformance/vectors/<family>/`` through its
``cases()``, and its docstring says what the family covers. The words the cases are written in
are :mod:`conformance.cases.build`; what the vectors must cover is
:mod:`conformance.cases.coverage`. ``python -m conformance.generate_vectors`` runs them.
"""
