"""What `corl eval` evaluates: models named on the command line, or every agent of a run.

    corl eval RUN                               # every agent of the run's latest checkpoint, on its validation set
    corl eval RUN --step 20                     # ... of checkpoints/step_000020
    corl eval RUN --step best                   # ... of RUN/best (logging.select's choice; best-<rule> for the others)
    corl eval RUN/best                          # a checkpoint folder (RUN/best, RUN/checkpoints/step_N): every agent in it
    corl eval RUN/checkpoints/step_000020       # a checkpoint folder: every agent in it
    corl eval RUN/checkpoints/step_000020/agent0 Qwen/Qwen2.5-1.5B tiny:llama-char   # models

Each model gets a label that tells the rows of a table apart: an agent's name (with its
run's folder name when several runs are compared), else the shortest tail of its path or
id that no other model shares. A path that is none of these is a one-line error saying
what was expected.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from corl.config import ConfigError, RunConfig, load_config
from corl.models import check_model_source
from corl.models.sources import split_model_name

EXPECTED = (
    "expected a run folder (with checkpoints/ or best/), a checkpoint folder (RUN/checkpoints/step_N), "
    "a model folder (with config.json), a GGUF file, a Hugging Face id or tiny:<family>"
)


class TargetError(ValueError):
    """A command-line model that is not one; the message says what was expected."""


@dataclass(frozen=True)
class Target:
    label: str  # the name in tables, JSON and records
    source: str  # what loads: a model folder, a Hugging Face id or tiny:<family>
    run: Path | None = None  # the run folder an agent comes from
    checkpoint: Path | None = None
    # an agent's own agents[].chat_template (a cohort may mix an instruct model prompted through
    # its chat template with a base model prompted with plain text); None: not an agent of a run
    chat: bool | None = None


def resolve_targets(items: list[str], step: str | None = None) -> list[Target]:
    """The models `items` stand for, labelled; `step` (a number, latest or best) picks a run's checkpoint."""
    targets = [t for item in items for t in _expand(item, step)]
    checkpoints: dict[Path, set] = {}
    for t in targets:
        if t.run is not None:
            checkpoints.setdefault(t.run, set()).add(t.checkpoint)

    def identity(t: Target) -> tuple[str, ...]:
        """What tells a model apart: an agent is (run folder..., [checkpoint,] agent), a folder its path."""
        name = Path(t.source).name
        if t.run is not None:  # the checkpoint only when one run is evaluated at several
            middle = (t.checkpoint.name,) if len(checkpoints[t.run]) > 1 else ()
            return (*t.run.resolve().parts, *middle, name)
        if t.checkpoint is not None:
            return (*t.checkpoint.resolve().parts, name)
        path = Path(t.source).expanduser()
        return path.resolve().parts if path.exists() else tuple(t.source.split("/"))

    labels = distinct_tails([identity(t) for t in targets])
    return [replace(t, label=label) for label, t in zip(labels, targets, strict=True)]


def distinct_tails(identities: list[tuple[str, ...]]) -> list[str]:
    """For each identity (path parts), its shortest tail that no other identity ends with, joined by '/'."""
    labels = []
    for i, ident in enumerate(identities):
        others = [other for j, other in enumerate(identities) if j != i]
        for size in range(1, len(ident) + 1):
            tail = ident[-size:]
            if all(other[-size:] != tail for other in others):
                break
        labels.append("/".join(tail))
    counts = Counter(labels)  # the same model named twice: number the copies
    seen: Counter = Counter()
    out = []
    for label in labels:
        seen[label] += 1
        out.append(label if counts[label] == 1 else f"{label} ({seen[label]})")
    return out


def _expand(item: str, step: str | None) -> list[Target]:
    """The models `item` stands for (labelled later)."""
    path = Path(item).expanduser()
    if not path.exists() and path.parent != Path(".") and path.parent.is_dir():
        raise TargetError(f"{item!r} not found (its folder {str(path.parent)!r} exists): {EXPECTED}")
    if not path.exists() or split_model_name(item) is not None:
        try:  # a hub id, tiny:<family> or a GGUF file; a missing folder fails here
            check_model_source(item, f"model {item!r}")
        except ConfigError as err:
            raise TargetError(f"{err}; {EXPECTED}") from None
        return [Target(item, item)]
    if path.is_file():
        raise TargetError(f"{item!r} is a file, not a model: {EXPECTED}")
    if (path / "config.json").is_file():
        run, checkpoint = _run_of_agent(path)
        cfg = run_config(run) if run is not None else None
        chat = next((a.chat_template for a in cfg.agents if a.name == path.name), None) if cfg is not None else None
        return [Target(path.name, str(path), run, checkpoint, chat)]
    if _is_run(path):
        return _agents(path, _pick_checkpoint(path, step))
    if path.name == "checkpoints" and path.parent.is_dir():
        return _agents(path.parent, _pick_checkpoint(path.parent, step))
    if _is_checkpoint(path):
        if step is not None:
            raise TargetError(f"--step picks a checkpoint of a run folder; {item!r} is a checkpoint already")
        return _agents(_run_of_checkpoint(path), path)
    runs = _runs_under(path)
    if runs:  # a study's folder (`corl quickstart --out`): say which runs it holds
        shown = ", ".join(runs[:6]) + (f" and {len(runs) - 6} more" if len(runs) > 6 else "")
        raise TargetError(f"{item!r} is not a run but holds runs: {shown}; give one or several of them")
    raise TargetError(f"{item!r} is not a model: {EXPECTED}")


def _runs_under(folder: Path, depth: int = 2) -> list[str]:
    """Run folders (with checkpoints/) at most `depth` levels below `folder`, as relative paths."""
    found: list[str] = []
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:  # an unreadable folder holds no run we can name
        return found
    for sub in subs:
        if _is_run(sub):
            found.append(sub.name)
        elif depth > 1:
            found += [f"{sub.name}/{name}" for name in _runs_under(sub, depth - 1)]
    return found


def _is_run(path: Path) -> bool:
    """A run folder: its checkpoints/, or (a finished run whose checkpoints were removed to free
    the disk, as the real-model study does) its config.yaml beside a selected checkpoint (best/)."""
    if (path / "checkpoints").is_dir():
        return True
    return (path / "config.yaml").is_file() and any(_is_checkpoint(p) for p in path.glob("best*"))


def _is_checkpoint(path: Path) -> bool:
    return any((path / name).is_file() for name in ("state.json", "state.pt", "manifest.json"))


def _run_of_agent(path: Path) -> tuple[Path | None, Path | None]:
    """An agent folder inside a checkpoint of a run (RUN/checkpoints/<checkpoint>/, RUN/best/):
    its run and checkpoint, else (None, None)."""
    checkpoint = path.parent
    if not _is_checkpoint(checkpoint):
        return None, None
    return _run_of_checkpoint(checkpoint), checkpoint


def _run_of_checkpoint(checkpoint: Path) -> Path | None:
    """The run a checkpoint folder belongs to: RUN of RUN/checkpoints/step_N, or of RUN/best and
    RUN/best-<rule> (the selected checkpoints, beside config.yaml); None for a folder moved elsewhere."""
    if checkpoint.parent.name == "checkpoints":
        return checkpoint.parent.parent
    if checkpoint.name.startswith("best") and _is_run(checkpoint.parent):
        return checkpoint.parent
    return None


def _pick_checkpoint(run: Path, step: str | None) -> Path:
    """RUN's latest checkpoint, or the one `step` names (a number, latest or best)."""
    root = run / "checkpoints"
    steps = sorted(p for p in root.glob("step_*") if p.is_dir())
    if step in (None, "latest"):
        pointer = root / "latest"
        chosen = root / pointer.read_text().strip() if pointer.is_file() else (steps[-1] if steps else None)
        if chosen is None or not chosen.is_dir():
            if not root.is_dir():  # removed; what logging.select chose is still there
                have = sorted(p.name for p in run.glob("best*") if _is_checkpoint(p))
                raise TargetError(
                    f"run folder {str(run)!r} has no checkpoints/ any more; evaluate {', '.join(have)} (--step best)"
                )
            raise TargetError(f"run folder {str(run)!r} has no checkpoint yet (checkpoints/ is empty); wait for its first one")
        return chosen
    if step.startswith("best"):  # RUN/best (logging.select), RUN/best-<rule> (logging.select_also)
        best = run / step
        if not _is_checkpoint(best):
            have = sorted(p.name for p in run.glob("best*") if _is_checkpoint(p))
            why = (
                f"it has {', '.join(have)}"
                if have
                else "logging.select chose none: with select last the final checkpoint is the result"
            )
            raise TargetError(f"run folder {str(run)!r} has no {step}/ ({why}); leave out --step for the latest")
        return best
    if not step.isdigit():
        raise TargetError(f"--step {step!r}: give a step number, latest, best or best-<rule>")
    chosen = root / f"step_{int(step):06d}"
    if not chosen.is_dir():
        have = ", ".join(str(int(p.name.removeprefix("step_"))) for p in steps) or "none"
        raise TargetError(f"run folder {str(run)!r} has no checkpoint after step {int(step)} (it has: {have})")
    return chosen


def _agents(run: Path | None, checkpoint: Path) -> list[Target]:
    """Every agent folder of `checkpoint`, in the run's agent order (else by name)."""
    folders = {p.name: p for p in checkpoint.iterdir() if p.is_dir() and (p / "config.json").is_file()}
    if not folders and any((p / "sharded").is_dir() for p in checkpoint.iterdir()):  # an FSDP2 run's step between
        run_arg = str(run) if run is not None else "RUN"
        raise TargetError(
            f"checkpoint {str(checkpoint)!r} holds its agents' FSDP2 shards only (the Hugging Face folders are written "
            f"for the final step and best/); write them first: corl export {run_arg} --step {int(checkpoint.name[5:])}"
        )
    if not folders:
        raise TargetError(f"checkpoint {str(checkpoint)!r} holds no agent folder (with config.json): {EXPECTED}")
    order = list(folders)
    cfg = run_config(run) if run is not None else None
    if cfg is not None:
        order = [a.name for a in cfg.agents if a.name in folders] + sorted(set(folders) - {a.name for a in cfg.agents})
    else:
        order.sort()
    chats = {a.name: a.chat_template for a in cfg.agents} if cfg is not None else {}
    return [Target(name, str(folders[name]), run, checkpoint, chats.get(name)) for name in order]


def run_config(run: Path) -> RunConfig | None:
    """The configuration RUN started with (RUN/config.yaml), or None when it has none."""
    path = run / "config.yaml"
    if not path.is_file():
        return None
    try:
        return load_config(path)
    except ConfigError as err:
        raise TargetError(f"run folder {str(run)!r}: cannot read its config.yaml: {err}") from None


# Options `corl eval` takes from the run when they are not given: the run's validation data
# and the prompt its agents were trained with.
DATA_OPTIONS = ("data", "split", "n", "prompt_field", "answer_field")
PROMPT_OPTIONS = ("template", "instruction", "max_new_tokens", "stop", "task")  # chat: each agent its own (Target.chat)


def run_defaults(targets: list[Target], given: frozenset[str] = frozenset()) -> tuple[dict, str | None]:
    """({option: value} taken for the options not in `given`, a note saying what was taken and
    from where), or ({}, None) when nothing is.

    From the runs' configs: their validation data (unless --data is given) and prompt. Several
    runs must agree (same validation data and prompt), else nothing is taken and the note says
    so; `corl eval` then asks for --data. From named models whose source declares the prompt
    they were pretrained with (`tiny:<family>`, ModelSource.prompt): that prompt."""
    runs = list(dict.fromkeys(t.run for t in targets if t.run is not None))
    configs = [(run, run_config(run)) for run in runs]
    configs = [(run, cfg) for run, cfg in configs if cfg is not None]
    if not configs:
        prompt = {k: v for k, v in _source_prompt(targets).items() if k not in given}
        if prompt:
            return prompt, f"prompt: the one these models were pretrained with ({_shown(prompt)})"
        moved = [t.label for t in targets if t.checkpoint is not None]
        if moved and not {"template", "instruction"} & given:
            return {}, (
                f"{', '.join(moved)}: a checkpoint outside its run folder (no config.yaml beside it), so the prompt it was "
                "trained with is unknown and the default one is used; evaluate it inside its run folder, or give "
                "--template and --instruction as the run's config.yaml says (data.template, data.instruction)"
            )
        return {}, None
    values = [_options(cfg) for _, cfg in configs]
    if any(v != values[0] for v in values[1:]):
        return {}, "the runs validate on different data or prompts, so none is taken from them"
    options = {k: v for k, v in values[0].items() if k not in given}
    prompt = _shown({k: v for k, v in options.items() if k in PROMPT_OPTIONS}) or "nothing: all given"
    if "data" in given or values[0]["data"] is None:
        options = {k: v for k, v in options.items() if k not in DATA_OPTIONS}
        where = "--data" if "data" in given else f"run {str(configs[0][0])!r} has no validation set (data.val)"
        return options, f"{where}; the run's prompt: {prompt}"
    rows = f"first {options['n']} rows" if "n" in options else "--n rows"
    return options, f"data: the run's validation set {options['data']!r} ({rows}); its prompt: {prompt}"


def _shown(options: dict) -> str:
    return ", ".join(f"{k} {v!r}" for k, v in options.items())


def _source_prompt(targets: list[Target]) -> dict:
    """The prompt options every model's named source declares (all the same), else {}."""
    from corl.models.sources import split_model_name

    prompts = []
    for target in targets:
        found = split_model_name(target.source)
        prompts.append(found[0].prompt if found is not None else None)
    if not prompts or any(p is None or p != prompts[0] for p in prompts):
        return {}
    return dict(prompts[0])


def _options(cfg: RunConfig) -> dict:
    from corl.tasks import task_spec

    d = cfg.data
    return {
        "data": d.val,
        "split": d.val_split,
        "n": d.val_size,
        "prompt_field": d.prompt_field,
        "answer_field": d.answer_field or "answer",
        "template": d.template,
        "instruction": d.instruction,
        "max_new_tokens": cfg.cohort.max_new_tokens,
        "stop": list(cfg.cohort.stop_strings),
        "task": d.task if task_spec(d.task).evaluate_as else "math",  # corl eval scores it as its task kind says
    }
