"""One typed name -> class registry, used for every pluggable kind (codecs, intra coders,
reconstructors): duplicate names are refused, unknown names get the list of known ones, and
third parties can add classes through an ``entry_points`` group without editing semcodec."""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Classes of one kind by name.

    Args:
        kind: what is registered, for messages (``"codec"``).
        base: the class every registered class must derive from.
        error: the exception raised for unknown names and bad options (a ``ValueError`` or
            ``LookupError`` subclass the caller's users already catch).
        entry_point_group: ``importlib.metadata`` group scanned once for third-party classes.
        builtins: imports the modules that register the built-in classes, run once on first use.
        builtin_names: the names ``builtins`` registers, declared so that help texts can list
            them without importing anything (:meth:`declared_names`); a test checks they match.
    """

    def __init__(self, kind: str, base: type, error: type[Exception] = ValueError,
                 entry_point_group: str | None = None,
                 builtins: Callable[[], None] | None = None,
                 builtin_names: tuple[str, ...] = ()):  # fmt: skip
        self.kind, self.base, self.error = kind, base, error
        self.builtin_names = builtin_names
        self.entry_point_group = entry_point_group
        self._builtins = builtins
        self._classes: dict[str, type[T]] = {}
        self._loaded = False
        self._lock = threading.RLock()  # threads that ask at once wait for one loader

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

    def _load(self) -> None:
        """Imports the built-ins and the entry points once. Thread-safe; marked loaded only
        when it succeeded (a failed import is raised, and tried again by the next call)."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            if self._builtins is not None:
                self._builtins()
            if self.entry_point_group:
                for ep in entry_points(group=self.entry_point_group):
                    if ep.name not in self._classes:
                        self.register(ep.name)(ep.load())
            self._loaded = True

    def names(self) -> list[str]:
        """Registered names, sorted."""
        self._load()
        return sorted(self._classes)

    def declared_names(self) -> list[str]:
        """The declared built-in names and the entry points' names, sorted, without importing
        any class (for help texts, where importing the built-ins would cost seconds)."""
        plugins = (ep.name for ep in entry_points(group=self.entry_point_group or ""))
        return sorted({*self.builtin_names, *plugins, *self._classes})

    def create(self, name: str, **options: object) -> T:
        """A new instance of class ``name``; ``options`` go to its constructor."""
        names = self.names()
        if name not in self._classes:
            raise self.error(f"unknown {self.kind} {name!r}; available: {', '.join(names)}")
        try:
            return self._classes[name](**options)
        except TypeError as exc:  # an unknown keyword
            raise self.error(f"{self.kind} {name!r}: {exc}") from exc
