"""Loading policies: any Hugging Face causal LM and its tokenizer, or a model of a registered source."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from corl.models.sources import split_model_name


def resolve_model_path(model: str) -> str:
    """A `<prefix>:<name>` model of a registered source (`corl.models.sources`, e.g. `tiny:<family>`)
    -> its model folder (built on first use); any other name unchanged."""
    source = split_model_name(model)
    if source is None:
        return model
    return str(source[0].resolve(source[1]))


def is_vision_model(model: str) -> bool:
    """Whether a model (id, folder or source name) is a vision-language model: its config has a
    vision tower (`vision_config`), as every image-text-to-text model in transformers does."""
    source = split_model_name(model)
    if source is not None:
        return source[0].vision
    from transformers import AutoConfig

    return getattr(AutoConfig.from_pretrained(resolve_model_path(model)), "vision_config", None) is not None


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


HUB_PROBE_TIMEOUT_S = 10.0  # one metadata request; the hub client's download retries take ~30 s


def check_model_source(model: str, where: str) -> None:
    """Fail in seconds, before anything loads, on a model that cannot be found, naming the
    option (`where`: "agents.1.model (agent 'b')"); from_pretrained would fail after long hub
    retries, deep in a stack, blaming the network and naming no agent.

    The rule, since a relative folder "ckpt/run" and a hub id "org/name" read the same:
    - `<prefix>:<name>` names of a registered model source (`tiny:<family>`) are built on use;
    - an existing path must be a Hugging Face model folder (config.json);
    - a path that cannot be a hub id (starting with ./ ../ ~ /, with a backslash or more than
      one slash), or whose first part is a folder here ("ckpt" of "ckpt/missing") and that
      is no cached hub model, is a missing folder: refused, naming what part of it exists;
    - a name that is no valid hub id is refused;
    - a hub id must be in the local cache, or (not HF_HUB_OFFLINE) known to the hub: one
      metadata request with a short timeout; "not found" or "unreachable" is refused here.
    """
    from corl.config import ConfigError

    found = split_model_name(model)
    if found is not None:
        source, name = found
        if source.check is not None:
            try:
                source.check(name)
            except ValueError as err:
                raise ConfigError(f"{where}: {err}") from None
        return
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ConfigError(f"{where}: {model!r} is not a Hugging Face model folder (no config.json in it)")
        return
    missing = f"{where}: model folder {model!r} not found ({_nearest(path)}); check the path"
    if _only_a_path(model):
        raise ConfigError(missing)
    problem = _invalid_repo_id(model)
    # "ckpt/missing" with a folder ckpt here is a path, unless a hub model of that name is cached
    here = "/" in model and Path(model.split("/")[0]).expanduser().is_dir()
    if here and (problem or not _cached(model)):
        raise ConfigError(missing)
    if problem:
        raise ConfigError(f"{where}: {model!r} is neither a folder ({_nearest(path)}) nor a Hugging Face hub id ({problem})")
    if _cached(model):
        return
    if _offline():
        raise ConfigError(
            f"{where}: {model!r} is neither a local folder nor in the Hugging Face cache, and HF_HUB_OFFLINE is set: "
            "download it first (huggingface-cli download), give a local path, or unset HF_HUB_OFFLINE"
        )
    _probe_hub(model, where, path)


def _only_a_path(model: str) -> bool:
    """A name that only a path can be: the hub's ids are "name" or "org/name"."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model or (os.sep != "/" and os.sep in model)


def _cached(model: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(model, "config.json"), str)


def _nearest(path: Path) -> str:
    """Where a missing path stops existing, for the error: the user sees which part is wrong."""
    full = Path(os.path.abspath(path))
    parent = next(p for p in full.parents if p.is_dir())  # the root at worst
    return f"{str(parent)!r} has no {full.relative_to(parent).parts[0]!r}"


def _invalid_repo_id(model: str) -> str | None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError as e:
        return str(e).split("\n")[0]
    return None


def _probe_hub(model: str, where: str, path: Path) -> None:
    """One metadata request: a missing repository or an unreachable hub is said now, by name."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    from corl.config import ConfigError

    not_here = f"{model!r} is not a local folder ({_nearest(path)})"
    try:
        HfApi().model_info(model, timeout=HUB_PROBE_TIMEOUT_S)
    except GatedRepoError:
        return  # it exists; the token decides when it loads
    except RepositoryNotFoundError:
        raise ConfigError(
            f"{where}: {not_here} and the Hugging Face hub has no model {model!r} (or it is private: log in with "
            "`hf auth login`); check the path or the id"
        ) from None
    except HfHubHTTPError:
        return  # the hub answered with another error: loading will report it
    except Exception as e:  # why: no connection, DNS, timeout (the HTTP client's own error types)
        raise ConfigError(
            f"{where}: {not_here}, and the Hugging Face hub could not be reached to look it up "
            f"({type(e).__name__}: {e}): check the path, or the network, or download the model first "
            "and set HF_HUB_OFFLINE=1"
        ) from None


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    return _ready_for_rollouts(AutoTokenizer.from_pretrained(path), path)


def _ready_for_rollouts(tok, path: str):
    """A tokenizer as the engines need it: a pad token, an EOS token, padding on the left."""
    if tok.pad_token is None:
        # Many base models ship without a pad token; padding is masked out everywhere.
        tok.pad_token = tok.eos_token
    if tok.eos_token is None:
        raise ValueError(f"tokenizer {path!r} has no EOS token: generation could never stop")
    tok.padding_side = "left"
    return tok


def load_policy(model: str, tokenizer: str | None = None, device: str | torch.device = "cpu", dtype: torch.dtype | None = None):
    """Load (model, tokenizer) by Hugging Face id, local path or `<source>:<name>`."""
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(model)
    tok = load_tokenizer(resolve_model_path(tokenizer) if tokenizer else path)
    if Path(path).exists() and not (Path(path) / "config.json").exists():
        raise ValueError(f"model directory {path!r} has no config.json: not a Hugging Face checkpoint")
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    policy.to(device if isinstance(device, torch.device) else resolve_device(device))
    return policy, tok


def load_vision_policy(model: str, device: str | torch.device = "cpu", dtype: torch.dtype | None = None):
    """Load (model, processor) of a vision-language model by id, local path or `<source>:<name>`:
    AutoModelForImageTextToText and its processor (whose tokenizer pads on the left)."""
    from transformers import AutoModelForImageTextToText

    from corl.vision.processing import load_processor

    path = resolve_model_path(model)
    if Path(path).exists() and not (Path(path) / "config.json").exists():
        raise ValueError(f"model directory {path!r} has no config.json: not a Hugging Face checkpoint")
    policy = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype or torch.float32)
    policy.to(device if isinstance(device, torch.device) else resolve_device(device))
    processor = load_processor(path)
    _ready_for_rollouts(processor.tokenizer, path)  # the processor's own tokenizer object, changed in place
    return policy, processor


def load_agent_policy(model: str, tokenizer: str | None = None, device: str | torch.device = "cpu", dtype=None):
    """(model, tokenizer, processor) of any policy: a vision-language model comes with its
    processor (tokenizer = the processor's), a causal LM with processor None."""
    if is_vision_model(model):
        if tokenizer:
            raise ValueError("a vision-language model uses its own processor; leave the agent's tokenizer unset")
        policy, processor = load_vision_policy(model, device, dtype)
        return policy, processor.tokenizer, processor
    policy, tok = load_policy(model, tokenizer, device, dtype)
    return policy, tok, None
