"""One typed name -> class registry, used for every pluggable kind (codecs, intra coders,
reconstructors): duplicate names are refused, unknown names get the list of known ones, and
third parties can add classes through an ``entry_points`` group without editing semcodec.

Built-in classes are declared by the module that registers them (``{"warp":
"semcodec.codec.reconstruct.warp"}``), as entry points are: the registry imports a module
only when its name is first asked for, so listing names imports nothing, creating ``warp``
does not import the diffusion decoder, and the package that holds a registry never imports
its built-ins (they import it: no import cycle).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Classes of one kind by name.

    Args:
        kind: what is registered, for messages (``"codec"``).
        base: the class every registered class must derive from.
        error: the exception raised for unknown names and bad options (a ``ValueError`` or
            ``LookupError`` subclass the caller's users already catch).
        entry_point_group: ``importlib.metadata`` group of third-party classes (each loaded
            when its name is first asked for).
        builtins: built-in name -> the module that registers it, imported on first use.
    """

    def __init__(self, kind: str, base: type, error: type[Exception] = ValueError,
                 entry_point_group: str | None = None,
                 builtins: Mapping[str, str] | None = None):  # fmt: skip
        self.kind, self.base, self.error = kind, base, error
        self.entry_point_group = entry_point_group
        self.builtins = dict(builtins or {})
        self._classes: dict[str, type[T]] = {}
        self._lock = threading.RLock()  # threads that ask at once wait for one import

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: registers the class under ``name`` and sets its ``name``."""

        def decorator(cls: type[T]) -> type[T]:
            if name in self._classes:
                raise ValueError(f"{self.kind} {name!r} is already registered "
                                 f"({self._classes[name].__qualname__})")  # fmt: skip
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise TypeError(f"{cls!r} is not a {self.base.__name__} subclass")
            cls.name = name
            self._classes[name] = cls
            return cls

        return decorator

    def _entry_points(self) -> dict[str, EntryPoint]:
        if not self.entry_point_group:
            return {}
        return {ep.name: ep for ep in entry_points(group=self.entry_point_group)}

    def names(self) -> list[str]:
        """Every name that can be created, sorted: built-ins, registered classes and entry
        points. Imports nothing."""
        return sorted({*self.builtins, *self._classes, *self._entry_points()})

    def get(self, name: str) -> type[T]:
        """The class registered as ``name``, importing its module on first use.

        Thread-safe; a module whose import fails is tried again by the next call.

        Raises:
            error: no built-in, registered class or entry point has that name.
        """
        with self._lock:
            if name not in self._classes and name in self.builtins:
                importlib.import_module(self.builtins[name])
                if name not in self._classes:
                    raise RuntimeError(f"{self.builtins[name]} does not register the "
                                       f"{self.kind} {name!r}")  # fmt: skip
            if name not in self._classes and name in (plugins := self._entry_points()):
                self.register(name)(plugins[name].load())
            if name not in self._classes:
                raise self.error(f"unknown {self.kind} {name!r}; available: "
                                 f"{', '.join(self.names())}")  # fmt: skip
            return self._classes[name]

    def create(self, name: str, **options: object) -> T:
        """A new instance of class ``name``; ``options`` go to its constructor."""
        cls = self.get(name)
        try:
            return cls(**options)
        except TypeError as exc:  # an unknown keyword
            raise self.error(f"{self.kind} {name!r}: {exc}") from exc
