"""The CLI reference page (docs/reference/cli.md), written from the `corl` command's own definitions.

`python scripts/gen_reference.py` writes it; `tests/test_docs.py` fails when the committed page
differs, so an option's name, default or help cannot drift from its documentation.
"""

from __future__ import annotations

HEADER = """# Command reference

Every `corl` command and option, generated from the command's definitions (`corl.cli`) by
`python scripts/gen_reference.py`; a test fails when this page is out of date. `corl COMMAND --help`
prints the same.
"""


def _cell(text: str) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _is_flag(param) -> bool:
    return bool(getattr(param, "is_flag", False))


def _default(param) -> str:
    if param.required:
        return "**required**"
    value = param.default
    if value is None or value == () or value == [] or (_is_flag(param) and value is False):
        return ""
    return "on" if _is_flag(param) else f"`{value}`"


def _names(param) -> str:
    if param.param_type_name == "argument":
        return f"`{param.name.upper()}`" + (" ..." if param.nargs == -1 else "")
    return ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])


def _type(param) -> str:
    if _is_flag(param):
        return "flag"
    annotation = param.type_descriptor.annotation
    return _cell(getattr(annotation, "__name__", str(annotation)).replace("typing.", ""))


def _command(name: str, command) -> list[str]:
    params = [p for p in command.params if p.name != "help"]
    args = " ".join(p.name.upper() + (" ..." if p.nargs == -1 else "") for p in params if p.param_type_name == "argument")
    out = ["", f"## corl {name}", "", f"`corl {name} [OPTIONS] {args}`".replace(" `", "`"), ""]
    out += [(command.help or "").strip(), ""]
    if params:
        out += ["| argument / option | type | default | what it does |", "|---|---|---|---|"]
        for p in params:
            out.append(f"| {_names(p)} | {_type(p)} | {_default(p)} | {_cell(p.help or '')} |")
    return out


def cli_reference() -> str:
    """The whole page, as markdown: one section per command, in the order `corl --help` lists them."""
    import typer

    from corl.cli import app

    group = typer.main.get_command(app)
    out = [HEADER.rstrip()]
    for name, command in group.commands.items():
        out += _command(name, command)
    return "\n".join(out) + "\n"
