"""Reading, overriding, writing and comparing run configurations (YAML files)."""

from __future__ import annotations

import difflib
import os
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from corl.config.run import RunConfig
from corl.config.sections import ConfigError, DataConfig


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides (value parsed as YAML; list items by index: agents.0.lr)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        path, text = item.split("=", 1)
        value = yaml.safe_load(text) if text.strip() else ""
        node: Any = raw
        parts = path.strip().split(".")
        for i, part in enumerate(parts[:-1]):
            node = _child(node, part, ".".join(parts[: i + 1]), create=True)
        last = parts[-1]
        if isinstance(node, list):
            index = _index(node, last, path)
            node[index] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(f"override {path}: {'.'.join(parts[:-1])} is a value, not a section")
    return raw


def _index(node: list, part: str, path: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"override {path}: {part!r} is not an index of a list of {len(node)}")
    return int(part)


def _child(node: Any, part: str, where: str, create: bool) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, where)]
    if not isinstance(node, dict):
        raise ConfigError(f"override {where}: parent is a value, not a section")
    if part not in node or node[part] is None:
        if not create:
            raise ConfigError(f"unknown key {where}")
        node[part] = {}
    return node[part]


def _format_validation_error(err: ValidationError, source: str) -> str:
    """One line for one error (`run.yaml: cohort.step: unknown key; ...`), a line per error under a heading otherwise."""
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = unknown_key_hint(e["loc"])
        given = e.get("input")
        shown = "" if e["type"] in ("missing", "extra_forbidden") or isinstance(given, dict) else f" (got {given!r})"
        lines.append(f"  {key}: {msg}{shown}")
    if len(lines) == 2:
        return f"{source}: {lines[1].strip()}"
    return "\n".join(lines)


# Keys people bring from other trainers, and where corl keeps them
MOVED_KEYS = {
    "lr": "the learning rate is per agent: agents[].lr (agents.0.lr for the first)",
    "learning_rate": "the learning rate is per agent: agents[].lr (agents.0.lr for the first)",
    "model": "models are per agent: agents[].model",
    "seed": "cohort.seed (agents[].seed for one agent)",
    "max_steps": "cohort.steps",
    "num_generations": "cohort.samples_per_prompt",
}


def unknown_key_hint(loc: tuple) -> str:
    """'unknown key' for the key at `loc`, with the keys of its section it may be a misspelling
    of (did you mean cohort.stop or cohort.steps?) or where a key known from elsewhere lives."""
    *parent, key = (str(p) for p in loc)
    moved = MOVED_KEYS.get(key)
    if moved is not None and [p for p in parent if not p.isdigit()] != ["agents"]:
        return f"unknown key: {moved}"
    known = _section_keys(RunConfig, parent)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.75) if known else []
    close += [k for k in known if k not in close and (k.startswith(key) or key.startswith(k)) and len(close) < 3]
    where = ".".join(parent)
    if close:
        return "unknown key; did you mean " + " or ".join(f"{where}.{k}" if where else k for k in close) + "?"
    if known:
        return f"unknown key; {where or 'the top level'} has: {', '.join(known)}"
    return "unknown key (check its spelling and section)"


def _section_keys(model: type[BaseModel], path: list[str]) -> list[str]:
    """The keys of the config section at `path` ("cohort", "agents.0"), [] when it is none."""
    for part in path:
        if part.isdigit():
            continue
        field = model.model_fields.get(part)
        model = _model_in(field.annotation) if field is not None else None
        if model is None:
            return []
    return list(model.model_fields)


def _model_in(annotation) -> type[BaseModel] | None:
    """The pydantic model a field holds: itself, an optional one, or a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def validate_config(raw: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config, apply `key=value` overrides and validate."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a folder; give the YAML file itself (a run's is RUN/config.yaml)")
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"{path} line {line}: byte {err.start} (0x{err.object[err.start]:02x}) is not UTF-8; save the file as UTF-8"
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return validate_config(apply_overrides(raw, overrides or []), str(path))


# What may change when a run is resumed: how long it runs, what it logs and when it
# validates or checkpoints, where it writes, how long ranks wait. Anything else (models,
# data, the update rule) would silently make the resumed run another experiment.
RESUME_MAY_CHANGE = (
    "cohort.steps",
    "cohort.stop.",
    "logging.",
    "suite.",
    "output_dir",
    "resume",
    "health.",
    "distributed.timeout_s",
    "distributed.preempt_grace_s",
    "plan.",
)


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"agents.0.lr": 1e-6, ...}: a nested config as dotted keys."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, child in items:
        out.update(flat(child, f"{prefix}.{key}" if prefix else str(key)))
    return out


def check_resume_config(started: RunConfig, now: RunConfig, source: str) -> None:
    """Refuse to resume with a configuration that differs from the one the run started with
    in anything but RESUME_MAY_CHANGE; the message names every changed key."""
    a, b = flat(started.model_dump(mode="json")), flat(now.model_dump(mode="json"))
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and not k.startswith(RESUME_MAY_CHANGE))
    if "data.answer_field" in changed and _labels_aside(started, now):
        changed.remove("data.answer_field")
    if changed:
        lines = "\n".join(f"  {k}: {a.get(k)!r} -> {b.get(k)!r}" for k in changed)
        raise ConfigError(
            f"cannot resume: the configuration differs from the one the run started with ({source}):\n{lines}\n"
            f"only {', '.join(k.rstrip('.') + ('.*' if k.endswith('.') else '') for k in RESUME_MAY_CHANGE)} may change; "
            "start a new run (another output_dir) to change the rest"
        )


def _labels_aside(started: RunConfig, now: RunConfig) -> bool:
    """Whether data.answer_field went between the default 'answer' and null: a run on unlabeled
    data records null (corl.trainer.setup.answers_as_found), one started before that recorded
    'answer', and under torchrun the folder is entered before the data is read. Either way the
    label source reads no answers (one that does cannot have null: config validation), so they
    feed only diagnostics, and validation reads the column 'answer' either way."""
    return {started.data.answer_field, now.data.answer_field} <= {DataConfig.model_fields["answer_field"].default, None}


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    """Write `cfg` as YAML, whole or not at all (a temporary file renamed into place)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
