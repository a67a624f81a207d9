"""Modules that moved keep answering at their old import paths.

Protocol version 1 named the specification's functions by module path (``spec.surface.fold_surface``)
and subjects were written against those paths. When the spec was grouped into chapters the modules
moved; a finder on ``sys.meta_path`` hands out the moved module itself under its old name, so code
written against either path sees the same module object (a patch through one is seen through the
other). Nothing in this project imports an old path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Mapping, Sequence


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve each old module path to the module or modules it moved to: one target gives that
    very module; several give a module that looks names up in each target in turn."""

    def __init__(self, moves: Mapping[str, Sequence[str]]) -> None:
        self._moves = dict(moves)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._moves:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        targets = [importlib.import_module(name) for name in self._moves[spec.name]]
        if len(targets) == 1:
            return _Kept(targets[0])
        merged = types.ModuleType(spec.name, f"moved to {', '.join(t.__name__ for t in targets)}")
        for module in reversed(targets):
            merged.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        return merged

    def exec_module(self, module: types.ModuleType) -> None:
        if isinstance(module, _Kept) and module.__spec__ is not None:
            # The import system returns whatever sys.modules holds under the old name once this
            # returns: the real module, its own spec intact.
            sys.modules[module.__spec__.name] = module.real


class _Kept(types.ModuleType):
    """A placeholder while the import system records the old name; replaced by the real module."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__)
        self.real = real


def install(moves: Mapping[str, Sequence[str]]) -> None:
    """Register ``moves`` (old path -> new paths) once per interpreter."""
    if not any(
        isinstance(finder, MovedModuleFinder) and finder._moves == dict(moves) for finder in sys.meta_path
    ):
        sys.meta_path.append(MovedModuleFinder(moves))
