"""`corl data`: the paper's datasets from the Hugging Face hub, written into the files the configs read.

corl data --list
corl data math500 math gsm8k          # -> data/math500/test.jsonl, data/math/train_level345.jsonl, ...
corl data humaneval mbpp --out /scratch/corl-data
corl data mathvista --mirror /datasets/hf   # a local copy of the hub: /datasets/hf/AI4Math/MathVista
corl data --verify                    # sha256 of every written file against data/MANIFEST.json

Offline, --mirror reads a copy of each dataset's hub repository (a `git clone` or an `hf download
--local-dir`), checked file by file against the digests it recorded; corl.data.mirror says how.
"""

from __future__ import annotations

from pathlib import Path

import typer


def data_command(
    names: list[str] = typer.Argument(None, help="Datasets to write (see --list); none with --verify or --list."),
    out: Path = typer.Option(Path("data"), "--out", help="Folder the files go into (<out>/<name>/<split>.jsonl)."),
    mirror: Path | None = typer.Option(
        None,
        "--mirror",
        help="Read <mirror>/<owner>/<name> instead of the hub: a git clone or `hf download --local-dir` of the dataset's "
        "hub repository, each file checked against the digests the copy recorded (a plain folder: written, recorded unverified).",
    ),
    list_: bool = typer.Option(False, "--list", help="List the datasets, their hub ids and files."),
    check: bool = typer.Option(False, "--verify", help="Check every file of <out>/MANIFEST.json against its sha256."),
) -> None:
    """Write the paper's datasets (MATH, MATH-500, GSM8K, AIME, AMC, HumanEval, MBPP, vision sets) as corl reads them."""
    from rich.markup import escape

    from corl.cli.output import console as make_console
    from corl.data.catalog import CATALOG, CatalogError, unverified, verify, write_dataset

    console, err = make_console(highlight=False, soft_wrap=True), make_console(stderr=True, highlight=False, soft_wrap=True)
    if list_:
        for entry in CATALOG.values():
            files = ", ".join(f"{out / entry.name / p.file}" for p in entry.parts)
            console.print(f"{entry.name:<11} {entry.hub:<38} {escape(files)}\n{'':<11} {escape(entry.what)}", emoji=False)
        return
    try:
        if check:
            problems = verify(out)
            for line in problems:
                err.print(f"[red]mismatch:[/red] {escape(line)}", emoji=False)
            if problems:
                raise typer.Exit(1)
            console.print(f"every file of {out / 'MANIFEST.json'} matches its sha256", emoji=False)
            unchecked = unverified(out)
            if unchecked:
                console.print(
                    f"note: {len(unchecked)} of them came from a mirror with no record of the hub's digests, unverified: "
                    f"{escape(', '.join(unchecked))}",
                    emoji=False,
                )
            return
        if not names:
            err.print("error: name the datasets to write (corl data --list shows them), or give --verify", emoji=False)
            raise typer.Exit(2)
        for name in names:
            write_dataset(name, out, mirror, say=lambda line: console.print(escape(line), emoji=False))
    except CatalogError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", emoji=False)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("data")(data_command)
