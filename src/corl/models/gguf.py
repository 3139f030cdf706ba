"""GGUF files as models: `gguf:<path>`, or any path ending in `.gguf`, wherever a model name goes.

People hold pretrained models as GGUF files (llama.cpp, Ollama, LM Studio). transformers reads
them (`from_pretrained(folder, gguf_file=...)`, with the `gguf` package): it dequantizes the
weights to float and rebuilds the tokenizer, with its chat template, from the file's vocabulary.
Both cost minutes of CPU for a 256k vocabulary, so each is done once per file and cached under
`$CORL_CACHE/gguf/` (else `$XDG_CACHE_HOME/corl/gguf`, else `~/.cache/corl/gguf`), keyed by the
file's sha256 (a file copied or renamed is found again; one changed in place is converted anew):

    <sha256[:16]>-tokenizer/   the tokenizer alone (what `corl plan` needs: no weights)
    <sha256[:16]>/             a plain Hugging Face folder: config, model.safetensors, tokenizer,
                               generation_config, and corl_gguf.json (the file it came from)

Each entry is written under a temporary name and renamed, so an interrupted conversion leaves
nothing that looks finished; processes that convert the same file at once (torchrun ranks)
wait for the first under a file lock. From then on the model is an ordinary local folder:
every engine, checkpoint and export sees a Hugging Face model.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from corl.models.sources import ModelSource, register_model_source

PREFIX = "gguf"
MARKER = "corl_gguf.json"  # written last into a converted folder: its presence marks it complete
MAGIC = b"GGUF"


def is_gguf_name(model: str) -> bool:
    """A bare path to a GGUF file (the `gguf:` prefix is optional for these)."""
    return model.lower().endswith(".gguf")


def cache_root() -> Path:
    if os.environ.get("CORL_CACHE"):
        return Path(os.environ["CORL_CACHE"]) / "gguf"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "corl" / "gguf"


def check(name: str) -> None:
    """Refuse, in a second and before anything loads, a GGUF name that cannot be used: no such
    file, not a GGUF file, no `gguf` package, an architecture transformers does not read."""
    path = Path(name).expanduser()
    if not path.is_file():
        raise ValueError(f"GGUF file {name!r} not found")
    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise ValueError(f"{name!r} is not a GGUF file (it does not start with the GGUF magic bytes)")
    _require_gguf_package()
    architecture = header_architecture(path)
    if architecture is not None and _normal(architecture) not in {_normal(a) for a in _supported().split(", ")}:
        raise ValueError(
            f"{name!r} holds a {architecture!r} model, which transformers cannot read from GGUF "
            f"(it reads: {_supported()}); convert it to a Hugging Face folder with its own tools"
        )


def _normal(architecture: str) -> str:
    return architecture.replace("_", "").replace("-", "").lower()  # transformers' qwen2moe is qwen2_moe


def header_architecture(path: Path) -> str | None:
    """`general.architecture` from the GGUF header, or None if it is not among the first scalar keys.

    Hand-read on purpose: gguf.GGUFReader (what transformers uses) parses every field, the whole
    vocabulary included (25 s for Gemma 3's 262k tokens on a busy CPU), where the check needs one
    string that writers put first. GGUF v2/v3: magic, u32 version, u64 tensor and key counts,
    then keys as (u64 length, bytes), a u32 type, a value; a string value is (u64 length, bytes).
    """
    scalar_sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # by GGUF value type
    with path.open("rb") as f:
        head = f.read(24)
        if len(head) < 24 or int.from_bytes(head[4:8], "little") < 2:
            return None
        for _ in range(min(int.from_bytes(head[16:24], "little"), 16)):
            key = f.read(int.from_bytes(f.read(8), "little")).decode("utf-8", "replace")
            kind = int.from_bytes(f.read(4), "little")
            if kind == 8:  # a string
                value = f.read(int.from_bytes(f.read(8), "little"))
                if key == "general.architecture":
                    return value.decode("utf-8", "replace")
            elif kind in scalar_sizes:
                f.read(scalar_sizes[kind])
            else:  # an array before the key: not worth walking
                return None
    return None


def _require_gguf_package() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ValueError("reading a GGUF file needs the gguf package: pip install 'corl[gguf]' (or gguf accelerate)") from None


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(name: str) -> str:
    """The sha256 of a GGUF file (computed once per process for an unchanged file)."""
    path = Path(name).expanduser().resolve()
    stat = path.stat()
    return _digest(str(path), stat.st_size, stat.st_mtime_ns)


def converted_folder(name: str) -> Path:
    """The Hugging Face folder of a GGUF file, converted on first use."""
    check(name)
    digest = file_digest(name)
    folder = cache_root() / digest[:16]
    if (folder / MARKER).is_file():
        return folder
    tokenizer = tokenizer_folder(name)
    with _locked(folder):
        if not (folder / MARKER).is_file():  # another process may have finished while we waited
            with _staging(folder) as tmp:
                _save_model(name, tmp)
                for item in tokenizer.iterdir():
                    shutil.copy2(item, tmp / item.name)
                record = {"file": str(Path(name).expanduser().resolve()), "sha256": digest, **_versions()}
                (tmp / MARKER).write_text(json.dumps(record, indent=2) + "\n")
    return folder


def tokenizer_folder(name: str) -> Path:
    """The tokenizer of a GGUF file (with its chat template, if the file has one), converted on first use."""
    check(name)
    folder = cache_root() / f"{file_digest(name)[:16]}-tokenizer"
    if (folder / MARKER).is_file():
        return folder
    with _locked(folder):
        if not (folder / MARKER).is_file():
            with _staging(folder) as tmp:
                from transformers import AutoTokenizer

                path = Path(name).expanduser().resolve()
                AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(tmp)
                (tmp / MARKER).write_text(json.dumps({"file": str(path), **_versions()}, indent=2) + "\n")
    return folder


def _save_model(name: str, out: Path) -> None:
    """Dequantize the file's weights into a float32 model and save it as safetensors."""
    from transformers import AutoModelForCausalLM

    path = Path(name).expanduser().resolve()
    try:
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    except ValueError as err:
        if "not supported" in str(err):
            raise ValueError(f"{name!r}: {err} (architectures transformers reads from GGUF: {_supported()})") from None
        raise
    # The weights are plain float tensors now; the GGUF quantizer flag only makes save_pretrained refuse.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    model.save_pretrained(out)


def config(name: str):
    """The transformers config, without converting any weights (`corl plan`)."""
    from transformers import AutoConfig

    digest = file_digest(name) if Path(name).expanduser().is_file() else None
    folder = cache_root() / digest[:16] if digest else None
    if folder is not None and (folder / MARKER).is_file():
        return AutoConfig.from_pretrained(folder)
    check(name)
    path = Path(name).expanduser().resolve()
    try:
        return AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    except ValueError as err:
        raise ValueError(f"{name!r}: {err} (architectures transformers reads from GGUF: {_supported()})") from None


def tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_folder(name))


def _supported() -> str:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return ", ".join(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer"))


def _versions() -> dict:
    import transformers

    return {"transformers": transformers.__version__}


@contextmanager
def _locked(folder: Path):
    """One process converts a file at a time; the others wait, then find its result."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _staging(folder: Path):
    """A temporary folder beside `folder`, renamed to it when the body completes (removed if it fails)."""
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete entry (no marker) from a killed conversion
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


register_model_source(
    PREFIX,
    ModelSource(
        resolve=converted_folder,
        config=config,
        tokenizer=tokenizer,
        describe="GGUF file",
        check=check,
    ),
)
