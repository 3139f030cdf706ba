"""The docs cannot drift: generated references match the code, the site builds with strict link
checking, and the README stays a guide (its links resolve; no dated lab notes)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def build_site(root: Path, out: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of the site under `root` (warnings, e.g. a dead link or anchor, fail it)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_generated_reference_pages_are_up_to_date():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_reference
    finally:
        sys.path.pop(0)
    for path, text in gen_reference.pages().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is out of date: run python scripts/gen_reference.py"
        )


def test_the_config_reference_lists_every_key_with_its_description():
    from corl.config.reference import config_reference

    page = config_reference()
    assert "| `grpo.beta` | float | `0.0` | k3 KL to a frozen reference; 0 loads no reference model. (≥ 0) |" in page
    assert "| `agents[].lr` | float | `1e-06` |" in page
    assert "| `cohort.stop.rule` | `'none'` \\| `'plateau'` \\| `'collapse'` | `'none'` |" in page


def undescribed_keys(page: str) -> list[str]:
    """The keys of a generated config reference whose "what it does" cell is empty (or only its limits)."""
    keys = []
    for line in page.splitlines():
        match = re.match(r"\| `([^`]+)` \| .* \| (.*) \|$", line)
        if match and not re.sub(r"\((?:[≥>≤<]|length ≥) [^)]*\)$", "", match.group(2)).strip():
            keys.append(match.group(1))
    return keys


def test_every_config_key_has_a_description():
    from corl.config.reference import config_reference

    assert undescribed_keys(config_reference()) == []


def test_a_key_without_a_description_is_found():
    from pydantic import BaseModel, Field

    from corl.config.reference import _section

    class Toy(BaseModel):
        """A section."""

        said: int = Field(1, description="It says.")
        silent: int = Field(2, ge=0)

    out: list[str] = []
    _section(Toy, "toy", out, set())
    assert undescribed_keys("\n".join(out)) == ["toy.silent"]


def test_the_site_builds_with_strict_link_checking(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs-material) is part of .[test]")
    done = build_site(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    # the home page links the README it points at; the site shows the README, its links the site's own
    assert 'href="readme/"' in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    readme = (tmp_path / "site" / "readme" / "index.html").read_text(encoding="utf-8")
    assert "corl quickstart" in readme and 'href="../studies/"' in readme


def test_a_broken_link_fails_the_build(tmp_path):
    pytest.importorskip("mkdocs")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    for name in ("mkdocs.yml", "README.md", "scripts/mkdocs_readme.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    with (tmp_path / "docs" / "index.md").open("a") as f:
        f.write("\n[a page that moved](runs.md#no-such-section)\n")
    done = build_site(tmp_path, tmp_path / "site")
    assert done.returncode != 0 and "no-such-section" in done.stdout + done.stderr


def test_the_readme_is_a_guide():
    lines = README.splitlines()
    assert len(lines) <= 320, f"README.md has {len(lines)} lines: measurements belong in docs/"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README), "dated lab notes belong in docs/"
    assert not re.search(r"\bissues? \d+\b", README, re.IGNORECASE), "tracker numbers mean nothing to a reader"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
    commands = [line for line in lines if line.startswith("python3 -m venv .venv")]
    assert commands[0].endswith("corl quickstart"), commands
    assert commands[1].endswith("python -m pytest tests -n 2 --dist loadfile"), commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest tests -n 2 --dist loadfile" in ci  # CI runs the README's test command
