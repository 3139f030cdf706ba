"""The `corl` command: a thin layer over the library.

    corl train configs/tiny.yaml --set grpo.beta=0.01     # one process, all agents
    torchrun --nproc-per-node 2 -m corl train CONFIG      # one process group per agent
    corl train --resume runs/my-run                       # continue where it stopped
    corl eval CKPT [CKPT ...] --data FILE                 # greedy, avg@k, maj@k, pooled maj@k
    corl eval RUN                                         # every agent of a run, on its validation set
    corl export RUN --step 40                             # a sharded (FSDP2) step's Hugging Face folders
    corl grade FILE                                       # completions from any generator, graded
    corl quickstart                                       # the embedded default, CPU, minutes

Each subcommand lives in its own module with a `register(app)` function; heavy imports
(torch, transformers) happen inside the commands so that `corl --help` is instant.
"""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="corl",
    help="Co-RL: train language models to reason without labels, by peer supervision.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _not_inside_a_multiprocessing_child() -> None:
    # why: a worker started with "spawn" (corl's answer checkers are) re-runs the parent's main
    # script with the parent's sys.argv. A script that calls corl without an
    # `if __name__ == "__main__":` guard would then start a second, silent copy of the run
    # in every worker (same rank, same gloo peers): refuse loudly instead. `_inheriting` is
    # the flag the standard library itself checks for this (multiprocessing.spawn).
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(
            "corl: the command was started again inside a multiprocessing worker, which re-ran the main script: "
            'put the code that runs corl under `if __name__ == "__main__":`'
        )
    # The command sits over the library and the studies: the studies' tiny models and tasks
    # (tiny:, tiny-vl:, vtiny:) are names every command knows (the library never imports them).
    importlib.import_module("corl.studies.plugins")


_COMMAND_MODULES = (
    "train",
    "plan",
    "evaluate",
    "grade",
    "quickstart",
    "theory",
    "diversity",
    "rephrase",
    "suite",
    "data",
    "export",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}").register(app)


def main() -> None:
    """The `corl` command. Errors every command can meet are answered here in one line:
    a sandbox that cannot give walls is found when the first program runs, which may be
    deep inside evaluation or training (exit 2: the host needs a backend, or the user's
    explicit CORL_SANDBOX=none)."""
    from corl.sandbox.isolation import SandboxUnavailable

    try:
        app()
    except SandboxUnavailable as err:
        print(f"corl: {err}", file=sys.stderr)
        raise SystemExit(2) from None
