"""A name -> implementation table: one list of names for each extension point.

The config validates names against these tables, the code looks entries up in them,
so a new rollout engine, label source, reward or task kind is one new module that
registers itself, and no list of names is written twice.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

PLUGIN_GROUP = "corl.plugins"  # entry points of installed packages that register entries
_plugins_loaded = False


def load_installed_plugins() -> None:
    """Import, once, every module that an installed package declares under the `corl.plugins`
    entry-point group (corl itself declares `corl.studies.plugins`): a name they register is
    then known without a config's `plugins:` list."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for entry in entry_points(group=PLUGIN_GROUP):
        entry.load()


class UnknownName(ValueError):
    """A name no entry of the registry has; the message lists the names it has."""


class Registry:
    """Entries registered by name; unknown names fail with the list of known ones."""

    def __init__(self, kind: str, package: str | None = None):
        self.kind = kind  # "label source", "reward", ...: used in error messages
        self.package = package  # importing it registers the built-in entries
        self._entries: dict[str, Any] = {}

    def register(self, name: str, entry: Any = None) -> Callable:
        """`registry.register("x", obj)`, or as a decorator: `@registry.register("x")`."""

        def add(obj: Any) -> Any:
            if name in self._entries and self._entries[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = obj
            return obj

        return add(entry) if entry is not None else add

    def _load(self) -> None:
        if self.package is not None:
            importlib.import_module(self.package)

    def get(self, name: str) -> Any:
        self._load()
        if name not in self._entries:
            load_installed_plugins()
        if name not in self._entries:
            raise UnknownName(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}")
        return self._entries[name]

    def names(self) -> list[str]:
        self._load()
        load_installed_plugins()
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        self._load()
        if name not in self._entries:
            load_installed_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


# The extension points, one table each. A table's own package fills it when first looked up (the
# package is named, not imported, here); plugins and installed entry points add to it. The config
# validates names against these tables without importing any implementation.
ENGINES: Registry = Registry("rollout engine", package="corl.rollout")
LABEL_SOURCES: Registry = Registry("label source", package="corl.labels")
REWARDS: Registry = Registry("reward", package="corl.rewards")
TASKS: Registry = Registry("task kind", package="corl.tasks")
DATA_SOURCES: Registry = Registry("data source", package="corl.data.sources")
MODEL_SOURCES: Registry = Registry("model source", package="corl.models.gguf")  # gguf:; tiny:, tiny-vl: by corl.studies
