"""A local copy of a Hugging Face dataset repository (`corl data --mirror DIR`), checked before it is read.

    DIR/<owner>/<name>/         the repository's files as the hub holds them, e.g. DIR/openai/gsm8k/
        README.md               its dataset card (the `configs:` YAML names each config's files)
        main/train-*.parquet    the data files, at the paths the repository has them

Offline nothing can be asked of the hub, so "good" means: every file of the copy is the file a hub
commit holds, by the digests the copy itself recorded when it was made, as the hub published them.

- a `git clone` of https://huggingface.co/datasets/<owner>/<name> (with `git lfs pull`): each file
  against its commit's blob (git's SHA-1 of the content) or, for Git LFS files, the SHA-256 of the
  pointer in the commit;
- `hf download <owner>/<name> --repo-type dataset --local-dir DIR/<owner>/<name>` (huggingface_hub):
  each file against the ETag it recorded in .cache/huggingface/download/ (a SHA-256 for LFS files,
  the git SHA-1 for the others).

A file that differs from its record (one answer edited), or a data file the record does not have,
is refused: nothing is written. A plain folder of files has no record: it is read, and what corl
writes from it is recorded as unverified (`verified: false` in MANIFEST.json), with a warning.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
SKIP = (".git", ".cache", ".gitattributes")  # the copy's own bookkeeping, not the dataset's files


class MirrorError(ValueError):
    """A mirror whose files are not those of a hub commit; the message names the file."""


@dataclass(frozen=True)
class MirrorCheck:
    """What was found: the commit the copy records (None for a plain folder) and whether it was checked."""

    revision: str | None
    verified: bool
    how: str  # "git clone", "hf download" or "plain folder"


def git_blob_sha1(data: bytes) -> str:
    """git's object id of a file's content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def check_mirror(repo: Path) -> MirrorCheck:
    """Check every file of the copy `repo` against the digests it recorded; MirrorError on a mismatch."""
    if (repo / ".git").exists():
        revision, expected = _git_digests(repo)
        how = "git clone"
    elif (repo / ".cache" / "huggingface" / "download").is_dir():
        revision, expected = _download_digests(repo)
        how = "hf download"
    else:
        return MirrorCheck(None, False, "plain folder")
    for path in _files(repo):
        rel = path.relative_to(repo).as_posix()
        if rel not in expected:
            raise MirrorError(f"{path}: not a file of the {how}'s commit {revision}: remove it, or make the copy again")
        _check_file(path, expected[rel], how, revision)
    return MirrorCheck(revision, True, how)


def _files(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob("*") if p.is_file() and p.relative_to(repo).parts[0] not in SKIP)


def _check_file(path: Path, digest: str, how: str, revision: str | None) -> None:
    data = path.read_bytes()
    if data.startswith(LFS_POINTER) and len(digest) == 64:
        raise MirrorError(f"{path} is a Git LFS pointer, not the data: run `git lfs pull` in {path.parent}")
    actual = hashlib.sha256(data).hexdigest() if len(digest) == 64 else git_blob_sha1(data)
    if actual != digest:
        kind = "sha256" if len(digest) == 64 else "git sha1"
        raise MirrorError(
            f"{path} differs from the {how}'s commit {revision} ({kind} {actual[:12]}..., the commit's {digest[:12]}...): "
            "it was changed since it was copied; make the copy again (nothing was written)"
        )


def _git_digests(repo: Path) -> tuple[str, dict[str, str]]:
    """{path: digest} of the clone's HEAD: the blob's SHA-1, or an LFS pointer's SHA-256."""
    try:
        revision = _git(repo, "rev-parse", "HEAD").decode().strip()
        listing = _git(repo, "ls-tree", "-r", "-z", "--long", "HEAD").split(b"\0")
    except (OSError, subprocess.CalledProcessError) as err:
        raise MirrorError(f"{repo}: a .git folder, but git cannot read its commit ({err})") from None
    expected, small = {}, []
    for line in filter(None, listing):
        meta, path = line.split(b"\t", 1)
        _, kind, oid, size = meta.split()
        if kind == b"blob":
            expected[path.decode()] = oid.decode()
            if size.isdigit() and int(size) < 1024:  # an LFS pointer is ~130 bytes
                small.append((path.decode(), oid.decode()))
    for path, oid in small:
        blob = _git(repo, "cat-file", "blob", oid)
        if blob.startswith(LFS_POINTER):
            fields = dict(line.split(" ", 1) for line in blob.decode().splitlines() if " " in line)
            expected[path] = fields.get("oid", "").removeprefix("sha256:")
    return revision, expected


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True, timeout=60).stdout


def _download_digests(repo: Path) -> tuple[str | None, dict[str, str]]:
    """{path: ETag} that huggingface_hub recorded for each file it downloaded into `repo`."""
    root = repo / ".cache" / "huggingface" / "download"
    expected, revisions = {}, set()
    for meta in root.rglob("*.metadata"):
        lines = meta.read_text(encoding="utf-8").splitlines()
        if len(lines) >= 2:
            revisions.add(lines[0].strip())
            expected[meta.relative_to(root).as_posix().removesuffix(".metadata")] = lines[1].strip().strip('"')
    return (revisions.pop() if len(revisions) == 1 else None), expected
