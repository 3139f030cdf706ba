"""The config reference page (docs/reference/config.md), written from the pydantic models themselves.

`python scripts/gen_reference.py` writes it; `tests/test_docs.py` fails when the committed page
differs from what the models say, so a field's type, default or description cannot drift from
its documentation.
"""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

HEADER = """# Configuration reference

Every key of a run's YAML config (`corl train CONFIG`), generated from corl's pydantic models
(`corl.config`) by `python scripts/gen_reference.py`; a test fails when this page is out of date.
Any key can be set on the command line too: `--set grpo.beta=0.01 --set agents.1.lr=3e-6`.
A key that does not exist is refused before anything loads, with the nearest valid key.
"""


def _models(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (X, X | None, list[X])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _type(annotation) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`" if isinstance(a, str) else f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type(a) for a in typing.get_args(annotation))
    if origin in (list, tuple, dict, set):
        args = ", ".join(_type(a) for a in typing.get_args(annotation) if a is not Ellipsis)
        return f"{origin.__name__}[{args}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation)).replace("|", "\\|")


def _default(field) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(its section's defaults)"
    elif field.default is PydanticUndefined:
        return "**required**"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(its section's defaults)"
    text = "null" if value is None else repr(value) if isinstance(value, str) else str(value)
    text = text.replace("\n", "\\n")
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def _limits(field) -> str:
    words = []
    for item in field.metadata:
        for name, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "length ≥")):
            value = getattr(item, name, None)
            if value is not None:
                words.append(f"{sign} {value}")
    return f" ({', '.join(words)})" if words else ""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _description(field) -> str:
    """A key's description; a section without one of its own is described by its model's docstring."""
    if field.description:
        return field.description
    models = _models(field.annotation)
    return (models[0].__doc__ or "").strip().split("\n\n")[0] if len(models) == 1 else ""


def _section(model: type[BaseModel], path: str, out: list[str], seen: set) -> None:
    if model in seen:
        return
    seen.add(model)
    doc = _cell((model.__doc__ or "").strip().split("\n\n")[0])
    title = path or "top level"
    out += ["", f"## {title}", "", f'<a id="{model.__name__.lower()}"></a>{doc}', ""]
    out += ["| key | type | default | what it does |", "|---|---|---|---|"]
    nested = []
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        out.append(f"| `{key}` | {_type(field.annotation)} | {_default(field)} | {_cell(_description(field))}{_limits(field)} |")
        for sub in _models(field.annotation):
            is_list = typing.get_origin(field.annotation) is list
            nested.append((sub, f"{key}[]" if is_list else key))
    for sub, key in nested:
        _section(sub, key, out, seen)


def config_reference() -> str:
    """The whole page, as markdown."""
    from corl.config import RunConfig

    out = [HEADER.rstrip()]
    _section(RunConfig, "", out, set())
    return "\n".join(out) + "\n"
