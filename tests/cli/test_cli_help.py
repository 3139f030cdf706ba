"""Every option's help text reaches the terminal as written: typer renders help as rich markup,
where "corl[vllm]" would print as "corl" (issue 24). Run as a user would: `corl CMD --help`."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import typer.main

from corl.cli import app

COMMANDS = typer.main.get_command(app).commands


def _plain(text: str) -> str:
    """The words of a help screen: panel borders and line breaks aside."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _help_screen(command: str) -> str:
    env = {**os.environ, "COLUMNS": "2000", "TERM": "dumb", "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "corl", command, "--help"], env=env, capture_output=True, text=True, timeout=600
    )  # a hang guard only
    assert proc.returncode == 0, proc.stderr
    return _plain(proc.stdout)


def test_eval_help_names_the_vllm_extra():
    assert "vllm (pip install corl[vllm])" in _help_screen("eval")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_help_is_printed_as_written(command):
    screen = _help_screen(command)
    helps = [(p.name, p.help) for p in COMMANDS[command].params if isinstance(getattr(p, "help", None), str)]
    assert helps  # every command documents its options
    for name, written in helps:
        # as written in the source: a rich escape "\[" stands for "["
        assert _plain(written.replace("\\[", "[")) in screen, (name, written)


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "2000", "TERM": "dumb", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "corl", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )  # a hang guard only


def test_error_messages_keep_their_brackets(tmp_path):
    # a path with brackets is the user's text, not markup: it must be printed as given
    proc = _run("train", "runs[best]/cfg.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "'runs[best]/cfg.yaml' not found" in _plain(proc.stderr), proc.stderr
    if importlib.util.find_spec("vllm") is None:
        proc = _run("suite", "tiny:llama-char", "--suite", "math", "--engine", "vllm", cwd=tmp_path)
        assert proc.returncode == 2 and "pip install 'corl[vllm]'" in _plain(proc.stderr), proc.stderr


def test_every_command_prints_user_text_as_written(tmp_path):
    """rich reads `:name:` as an emoji code: a path or a data source such as tiny:train:2000 must
    come out as the user wrote it from every command's console, not as tiny🚋2000."""
    import subprocess
    import sys

    for args in (
        ["plan", "runs/:train:/a.yaml"],
        ["data", "tiny:train:2000"],
        ["diversity", "--models", "a", "b", "--data", "x:train:y"],
    ):
        done = subprocess.run([sys.executable, "-m", "corl", *args], capture_output=True, text=True, cwd=tmp_path)
        assert ":train:" in done.stdout + done.stderr and "\U0001f68b" not in done.stdout + done.stderr, (args, done.stderr)
