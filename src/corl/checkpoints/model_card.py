"""Checkpoints that describe themselves: a Hugging Face model card (README.md) in every agent folder.

    RUN/checkpoints/step_000040/agent0/README.md

The YAML header (base_model, library_name, tags, datasets, model-index) is written by
`huggingface_hub`'s ModelCardData, so the Hub and its tools read it; the body says how the
model was made: the method (label source and reward), the cohort and which peer taught this
agent (the label source's topology), the data, the steps and key settings, the last
validation, and the results of any `corl suite` run on this checkpoint (added by the suite
afterwards, between the `corl:suite` markers).

Cards are written into the checkpoint's temporary folder before it is renamed into place,
from the run's config.yaml and metrics.jsonl: they appear atomically with the checkpoint
and are in its manifest.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from corl.config import RunConfig, load_config
from corl.files import write_whole
from corl.labels import LabelContext, label_source_spec
from corl.rewards import reward_spec
from corl.tracking.metrics import read_metrics

CARD = "README.md"
SUITE_METRIC = " (corl suite)"  # the metric_name suffix of the model-index entries a suite wrote
SUITE_START, SUITE_END = "<!-- corl:suite -->", "<!-- /corl:suite -->"
NO_SUITE = "No benchmark suite has been run on this checkpoint yet: `corl suite PATH --suite NAME` adds its results here."
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def write_model_cards(checkpoint: Path, run_dir: Path, step: int) -> None:
    """A card in every agent folder (one holding config.json) of `checkpoint`, from the run's files."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        return  # not a corl run folder (a checkpoint written by hand): nothing to describe it with
    cfg = load_config(config)
    validation = last_validation(run_dir, step)
    for index, agent in enumerate(cfg.agents):
        folder = checkpoint / agent.name
        if (folder / "config.json").is_file():
            write_whole(folder / CARD, str(model_card(cfg, index, step, validation)))


def last_validation(run_dir: Path, step: int) -> dict | None:
    """The last validation row a checkpoint after `step` steps has seen (logged at a step <= `step`: rows count steps from 1)."""
    if not (run_dir / "metrics.jsonl").is_file():
        return None
    rows = [r for r in read_metrics(run_dir, "val") if r["step"] <= step]  # steps count from 1
    return rows[-1] if rows else None


def hub_id(name: str | None) -> str | None:
    """`name` when it reads as a Hugging Face Hub id (org/name) and is no local path, else None."""
    if name and _HUB_ID.match(name) and not Path(name).expanduser().exists():
        return name
    return None


def _label_context(cfg: RunConfig) -> LabelContext:
    """What a topology set by the config reads (`star`'s cohort.teacher)."""
    return LabelContext(seed=cfg.cohort.seed, teacher=cfg.cohort.teacher)


def teachers_text(cfg: RunConfig, index: int) -> str:
    """Who labels agent `index`'s samples, in words (the label source's topology)."""
    spec = label_source_spec(cfg.cohort.label_source)
    teachers = spec.teachers_of(index, len(cfg.agents), _label_context(cfg))
    if teachers is None:
        return spec.description
    if not teachers:
        return "no agent: " + spec.description
    if teachers == (index,):
        if spec.needs_teacher:
            return f"its own EMA copy (momentum {cfg.cohort.ema_momentum}): the copy's majority answer is its label"
        return f"itself: its own {spec.rule} is its label"
    names = " and ".join(f"`{cfg.agents[t].name}`" for t in teachers)
    return f"{names}: {'their pooled' if len(teachers) > 1 else 'its'} {spec.rule} is this agent's label"


def method_name(cfg: RunConfig) -> str:
    """Co-RL, TTRL, GT-Reward, ... from the registered descriptions (their words before the colon)."""
    spec, reward = label_source_spec(cfg.cohort.label_source), reward_spec(cfg.cohort.reward)
    if not reward.binary:  # an intrinsic or gold reward names the method (RENT, Intuitor, GT-Reward for code)
        return reward.description.split(":")[0]
    head = spec.description.split(":")[0]
    return head if head != spec.description else spec.name


def model_card(cfg: RunConfig, index: int, step: int, validation: dict | None = None) -> ModelCard:
    """The card of agent `index` after `step` steps of the run `cfg`."""
    agent = cfg.agents[index]
    spec, reward = label_source_spec(cfg.cohort.label_source), reward_spec(cfg.cohort.reward)
    tags = ["corl", "reinforcement-learning", "grpo", f"corl-label-{spec.name}", f"corl-reward-{reward.name}"]
    if not spec.reads_gold and not reward.reads_gold:
        tags.insert(1, "label-free")
    results = []
    accuracy = (validation or {}).get(f"{agent.name}/val_accuracy")
    if accuracy is not None:
        results.append(
            EvalResult(
                task_type="text-generation",
                dataset_type=hub_id(cfg.data.val) or "local",
                dataset_name=cfg.data.val,
                dataset_split=cfg.data.val_split if hub_id(cfg.data.val) else None,
                metric_type="accuracy",
                metric_name="greedy accuracy (corl validation)",
                metric_value=accuracy,
            )
        )
    data = ModelCardData(
        base_model=hub_id(agent.model),
        library_name="transformers",
        pipeline_tag="text-generation",
        tags=tags,
        datasets=[hub_id(f.path) for f in cfg.data.train_files() if hub_id(f.path)] or None,
        model_name=agent.name,
        eval_results=results or None,
    )
    body = "\n\n".join(
        [
            _summary(cfg, index, step),
            _method(cfg, index),
            _cohort(cfg, index),
            _data(cfg),
            _settings(cfg, index, step),
            _validation(cfg, index, validation),
            f"## Benchmark suite\n\n{SUITE_START}\n{NO_SUITE}\n{SUITE_END}",
            _usage(),
        ]
    )
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}\n")


def _summary(cfg: RunConfig, index: int, step: int) -> str:
    agent = cfg.agents[index]
    return (
        f"# {agent.name}\n\nAgent {index} of a {len(cfg.agents)}-agent cohort trained by "
        f"corl with {method_name(cfg)} (reinforcement learning with GRPO updates, rewards from the label source below), for {step} of {cfg.cohort.steps} steps from `{agent.model}`."
    )


def _method(cfg: RunConfig, index: int) -> str:
    spec, reward = label_source_spec(cfg.cohort.label_source), reward_spec(cfg.cohort.reward)
    g = cfg.grpo
    lines = [
        "## Method",
        "",
        f"- **Label source** `{spec.name}`: {spec.description}.",
        f"- **Taught by** {teachers_text(cfg, index)}.",
        f"- **Reward** `{reward.name}`: {reward.description}.",
        f"- **Update** GRPO: clip [1 - {g.epsilon_low}, 1 + {g.epsilon_high}], KL beta {g.beta}, "
        f"loss aggregation {g.loss_aggregation}, advantages {'divided by the group std' if g.scale_rewards == 'group' else 'not scaled'}, "
        f"{g.num_passes} pass(es) per step.",
    ]
    return "\n".join(lines)


def _cohort(cfg: RunConfig, index: int) -> str:
    spec = label_source_spec(cfg.cohort.label_source)
    lines = ["## Cohort", "", "| agent | base model | taught by | learning rate |", "|---|---|---|---|"]
    for n, agent in enumerate(cfg.agents):
        teachers = spec.teachers_of(n, len(cfg.agents), _label_context(cfg))
        if teachers is None:
            taught = spec.name
        else:
            taught = ", ".join("itself" if t == n else cfg.agents[t].name for t in teachers) or "dataset answers"
        me = " (this model)" if n == index else ""
        lines.append(f"| {agent.name}{me} | `{agent.model}` | {taught} | {agent.lr:g} |")
    return "\n".join(lines)


def _data(cfg: RunConfig) -> str:
    d = cfg.data
    rows = f", first {d.max_rows} rows" if d.max_rows else ""
    mixed = isinstance(d.train, list)  # several files: each with its weight
    files = ", ".join(f"`{f.path}`" + (f" (weight {f.weight:g})" if mixed else "") for f in d.train_files())
    lines = [
        "## Data",
        "",
        f"- Training prompts: {files} (field `{d.prompt_field}`{rows}; task kind `{d.task}`).",
        f"- Validation: `{d.val}` (first {d.val_size} rows)." if d.val else "- Validation: none.",
        f"- Prompt template: `{d.template!r}`, instruction `{d.instruction!r}`.",
    ]
    return "\n".join(lines)


def _settings(cfg: RunConfig, index: int, step: int) -> str:
    c, compute = cfg.cohort, cfg.compute
    lora = f"r={compute.lora.r}, alpha={compute.lora.alpha:g} (merged into these weights)" if compute.lora else "no"
    settings = [
        ("steps", f"{step} of {c.steps}"),
        ("prompts per step", c.prompts_per_step),
        ("samples per prompt (K)", c.samples_per_prompt),
        ("temperature / top-p", f"{c.temperature:g} / {c.top_p:g}"),
        ("max new tokens", c.max_new_tokens),
        ("min agreement of a label", c.min_agreement),
        ("learning rate", f"{cfg.agents[index].lr:g}"),
        ("LoRA", lora),
        ("bf16", compute.bf16),
        ("rollout engine", cfg.rollout.engine),
        ("seed", c.seed),
    ]
    return "\n".join(["## Training", "", "| setting | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in settings)])


def _validation(cfg: RunConfig, index: int, validation: dict | None) -> str:
    if not validation:
        return "## Validation\n\nNo validation has run yet (set data.val)."
    after = "before the first step" if validation["step"] <= 0 else f"after step {validation['step']}"
    lines = [f"## Validation\n\nGreedy accuracy on `{cfg.data.val}` {after}:\n", "| agent | accuracy |", "|---|---|"]
    for n, agent in enumerate(cfg.agents):
        value = validation.get(f"{agent.name}/val_accuracy")
        if value is not None:
            lines.append(f"| {'**' + agent.name + '**' if n == index else agent.name} | {value:.3f} |")
    return "\n".join(lines)


def _usage() -> str:
    return (
        "## Use\n\n```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        'tokenizer = AutoTokenizer.from_pretrained("PATH/TO/THIS/FOLDER")\n'
        'model = AutoModelForCausalLM.from_pretrained("PATH/TO/THIS/FOLDER")\n```\n\n'
        "Evaluate it with `corl eval PATH/TO/THIS/FOLDER --data FILE`, or every agent of the run with `corl eval RUN`."
    )


# -- suite results, added to a checkpoint's card after `corl suite` ----------------------------------------


def record_suite_results(results: dict) -> list[Path]:
    """Put each checkpoint's figures of a suite run into its card (corl-written cards only); returns the cards updated."""
    updated = []
    for checkpoint, row in results.get("models", {}).items():
        card_path = Path(checkpoint) / CARD
        if not card_path.is_file():
            continue
        card = ModelCard.load(card_path)
        if "corl" not in (card.data.tags or []) or SUITE_START not in card.text:
            continue  # a card someone else wrote
        _put_suite(card, results, row, Path(checkpoint).name)
        write_whole(card_path, str(card))
        _update_manifest(card_path)
        updated.append(card_path)
    return updated


def _put_suite(card: ModelCard, results: dict, row: dict, name: str) -> None:
    protos = results.get("protocols", {})
    lines = ["| benchmark | metric | value | 95% interval |", "|---|---|---|---|"]
    evals = [e for e in (card.data.eval_results or []) if not (e.metric_name or "").endswith(SUITE_METRIC)]
    for bench, entry in row.items():
        if bench == "average" or entry.get("status") != "ok":
            continue
        proto = protos.get(bench, {})
        ci = entry.get("ci95")
        lines.append(
            f"| {proto.get('title', bench)} | {proto.get('metric', '')} | {entry['value']:.3f} | "
            + (f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—")
            + " |"
        )
        evals.append(
            EvalResult(
                task_type="text-generation",
                dataset_type=bench,
                dataset_name=proto.get("title", bench),
                metric_type=str(proto.get("metric", "accuracy")),
                metric_value=entry["value"],
                metric_name=f"{proto.get('metric', 'accuracy')}{SUITE_METRIC}",
            )
        )
    section = f"Suite `{results.get('suite')}` (engine {results.get('engine')}):\n\n" + "\n".join(lines)
    start, end = card.text.index(SUITE_START) + len(SUITE_START), card.text.index(SUITE_END)
    card.text = card.text[:start] + "\n" + section + "\n" + card.text[end:]
    card.data.eval_results = evals or None
    card.data.model_name = card.data.model_name or name  # the model-index needs a name


def _update_manifest(card_path: Path) -> None:
    """The checkpoint's manifest lists every file with its sha256: keep the edited card's entry true."""
    manifest = card_path.parent.parent / "manifest.json"
    if not manifest.is_file():
        return
    entries = json.loads(manifest.read_text())
    name = f"{card_path.parent.name}/{card_path.name}"
    if name in entries:
        data = card_path.read_bytes()
        entries[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        write_whole(manifest, json.dumps(entries, indent=1))
