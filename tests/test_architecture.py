"""The package's shape: imports point one way (each package imports only the packages its
entry in ALLOWED names, as docs/architecture.md draws them), the library never imports the CLI,
modules stay small, and every extension point is one registry whose names the config offers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from corl.registry import Registry, UnknownName

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 450  # a module past this is doing more than one job


def modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "corl").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of the package that `name` imports, at module level or inside functions."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                root = ".".join(base + ([node.module] if node.module else []))
            else:
                root = node.module or ""
            targets = [root] + [f"{root}.{a.name}" for a in node.names]
        else:
            continue
        # a submodule importing its own package (to reach a sibling) is not a cycle
        found |= {t for t in targets if t in known and t != name and not name.startswith(t + ".")}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_never_imports_the_cli():
    offenders = {
        m: sorted(t for t in ts if t.startswith("corl.cli")) for m, ts in graph().items() if not m.startswith("corl.cli")
    }
    assert {m: ts for m, ts in offenders.items() if ts and m != "corl.__main__"} == {}


ENTRY_POINTS = ("corl.cli", "corl.__main__")  # the command: a thin layer over the library and the studies


def test_the_library_never_imports_the_studies():
    """The studies (quickstart, theory, claims, report, diversity, tiny families, rephrase) are
    built on the library; the library reaches them only through its registries."""
    offenders = {
        m: sorted(t for t in ts if t == "corl.studies" or t.startswith("corl.studies."))
        for m, ts in graph().items()
        if not m.startswith("corl.studies") and not m.startswith(ENTRY_POINTS)
    }
    assert {m: ts for m, ts in offenders.items() if ts} == {}


def test_the_direction_check_sees_an_import_of_the_studies(tmp_path):
    """`imports_of` finds a function-level import of a study (the form the old loader used)."""
    module = tmp_path / "loading.py"
    module.write_text("def load():\n    from corl.studies.tiny.pretrain import ensure_pretrained\n")
    known = {"corl.studies.tiny.pretrain", "corl.models.loading"}
    assert imports_of("corl.models.loading", module, known) == {"corl.studies.tiny.pretrain"}


SHARED = {"registry", "grpo", "files", "_moved"}  # root modules every package may import (corl/__init__.py says why)
# package -> the packages it may import, bottom of the house first (docs/architecture.md, one paragraph each)
ALLOWED = {
    "answers": set(),
    "sandbox": set(),
    "labels": set(),
    "config": {"rollout"},  # rollout.options only: the engines' option blocks, pure pydantic
    "vision": {"answers"},
    "data": {"answers", "config", "vision"},
    "tasks": {"answers", "data", "labels", "sandbox"},
    "rewards": {"labels", "tasks"},
    "rollout": {"vision"},
    "models": {"config", "vision"},
    "parallel": {"config"},
    "tracking": {"config", "labels"},
    "checkpoints": {"config", "labels", "models", "parallel", "rewards", "tracking"},
    "evaluation": {"answers", "checkpoints", "config", "data", "labels", "models", "rollout", "sandbox", "tasks", "vision"},
    "trainer": {
        "answers",
        "checkpoints",
        "config",
        "data",
        "evaluation",
        "labels",
        "models",
        "parallel",
        "rewards",
        "rollout",
        "tasks",
        "tracking",
        "vision",
    },  # fmt: skip
    "plan": {"config", "data", "labels", "models", "parallel", "rewards", "rollout", "trainer"},
    "launch": {"checkpoints", "config", "data", "models", "parallel", "tracking", "trainer"},
}
LIBRARY = set(ALLOWED) | SHARED
ALLOWED["studies"] = LIBRARY | {"launch", "plan"}  # built on the library, reached by it only through registries
ALLOWED["cli"] = LIBRARY | {"studies"}  # the command: a thin layer over both


def package_of(module: str) -> str:
    """corl.trainer.loop -> trainer; corl.registry -> registry; corl -> corl."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def forbidden_imports(edges: dict[str, set[str]], allowed: dict[str, set[str]]) -> dict[str, list[str]]:
    """{module: [imported modules of packages its own package may not import]}."""
    out = {}
    for module, targets in edges.items():
        own = package_of(module)
        if own in SHARED or own in ("corl", "__main__"):
            continue
        bad = sorted(t for t in targets if package_of(t) not in allowed.get(own, set()) | SHARED | {own})
        if bad:
            out[module] = bad
    return out


def test_every_package_imports_only_what_it_may():
    assert forbidden_imports(graph(), ALLOWED) == {}


def test_every_package_has_an_entry_and_a_paragraph():
    """A new package says what it may import here, and what it is for in docs/architecture.md."""
    packages = {p.name for p in (SRC / "corl").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(ALLOWED) - SHARED
    doc = (SRC.parent / "docs" / "architecture.md").read_text()
    assert [p for p in sorted(packages) if f"### `corl.{p}`" not in doc] == []
    for p in packages:
        assert (SRC / "corl" / p / "__init__.py").read_text().lstrip().startswith('"""'), f"corl.{p} has no docstring"


def test_the_root_holds_packages_and_a_handful_of_shared_modules():
    loose = {p.stem for p in (SRC / "corl").glob("*.py")} - {"__init__", "__main__"}
    assert loose == SHARED


def test_the_direction_check_names_an_import_against_the_flow():
    edges = {"corl.data.rows": {"corl.trainer.loop", "corl.config.sections", "corl.registry"}, "corl.trainer.loop": {"corl.data"}}
    assert forbidden_imports(edges, ALLOWED) == {"corl.data.rows": ["corl.trainer.loop"]}


def test_old_import_paths_still_work_for_one_release_with_a_warning():
    """A moved module is the same object under its old name (so patching either patches both)."""
    import importlib
    import subprocess
    import sys

    import corl.checkpoints.checkpoint
    from corl._moved import MOVED

    for name in MOVED:  # a name imported before (by another test) warns no more: import each afresh
        sys.modules.pop(name, None)
    with pytest.warns(FutureWarning, match=r"corl\.checkpoint moved to corl\.checkpoints\.checkpoint"):
        old = importlib.import_module("corl.checkpoint")
    assert old is corl.checkpoints.checkpoint
    for name, new in MOVED.items():
        sys.modules.pop(name, None)
        with pytest.warns(FutureWarning, match=f"{name} moved to {new}"):
            assert importlib.import_module(name) is importlib.import_module(new)
    # python -m with the old name still runs the module, and says where it went
    done = subprocess.run([sys.executable, "-m", "corl.torchrun", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "torchrun" in done.stdout and "corl.torchrun moved to corl.launch.torchrun" in done.stderr


def test_no_module_is_huge():
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_registry_names_come_from_one_table():
    import corl.registry
    from corl.labels import LABEL_SOURCES
    from corl.rewards import REWARDS
    from corl.rollout import ENGINES
    from corl.tasks import TASKS

    # the config's table is the package's: one object, filled by the package it names
    assert (LABEL_SOURCES, REWARDS, ENGINES, TASKS) == (
        corl.registry.LABEL_SOURCES,
        corl.registry.REWARDS,
        corl.registry.ENGINES,
        corl.registry.TASKS,
    )

    assert {"peer", "self", "truth", "ema", "ring2"} <= set(LABEL_SOURCES.names())
    assert {"agreement", "entropy", "self_certainty"} <= set(REWARDS.names())
    assert "hf" in ENGINES and "math" in TASKS


def test_a_registry_refuses_a_name_twice_and_lists_names_it_has():
    table = Registry("widget")
    table.register("a", 1)

    @table.register("b")
    def b():
        return 2

    assert table.get("b") is b and table.names() == ["a", "b"]
    table.register("a", 1)  # the same entry again (a module imported twice) is fine
    with pytest.raises(ValueError, match="registered twice"):
        table.register("a", 3)
    with pytest.raises(UnknownName, match="unknown widget 'c'; choose one of: a, b"):
        table.get("c")
