"""A package's names loaded on first use: the ``__getattr__`` foldline's lazy packages share.

A package lists each public name's home module; ``__getattr__ = lazy_getattr(__name__, homes)`` imports the home
the first time the name is read and keeps the value on the package, so ``from package import Name`` and
``package.Name`` work for every listed name while ``import package`` imports none of the homes. A name not listed
is an ``AttributeError`` (which ``from package import submodule`` then falls back from to the submodule, as usual).
The packages that list their names so: :mod:`actors`, :mod:`actors.tools`, :mod:`signals`,
:mod:`runtime.cache`, :mod:`runtime.config` (each keeps its names under ``TYPE_CHECKING`` too where mypy needs
their types). The public face, :mod:`runtime`, keeps its own copy of these lines: importing it imports none of
its submodules, this one included (``tests/test_exports.py``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name of ``homes`` read from its home module, once."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
