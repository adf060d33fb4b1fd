"""Package attributes given on first use (PEP 562): a package's ``__getattr__`` imports the module that defines
a name only when the name is first asked for, and keeps it in the package's namespace, so later lookups are plain.

Invariant: ``package.name``, ``from package import name`` and ``from package import *`` give the same object
as an eager import would; an unknown name raises ``AttributeError`` naming the package.
"""

from __future__ import annotations

import importlib


def attribute(namespace: dict, on_first_use: dict, name: str):
    """``name`` of the package whose globals are ``namespace``, imported from ``on_first_use[name]``."""
    module = on_first_use.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
