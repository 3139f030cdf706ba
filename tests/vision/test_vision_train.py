"""Vision-language agents in the trainer, on CPU with tiny random-init models of two
architectures (Qwen2-VL: native-resolution ViT with packed patches and M-RoPE; LLaVA with a
SigLIP tower): sampling with images, the update's forward equal to the sampler's, the update
moving the language and the vision parts (or only the language part with freeze_vision),
checkpoints that load with the auto classes and their processor, a bit-exact resume, and a
Co-RL run of a mixed cohort (two vision agents and a text agent) on the image task."""

from __future__ import annotations

import copy

import pytest
import torch
from safetensors.torch import load_file

from corl.config import AgentConfig, GRPOConfig, validate_config
from corl.data.rows import IMAGES_INPUT, Problem, PromptTemplate
from corl.launch.run import launch
from corl.models import is_vision_model, load_agent_policy
from corl.rollout import SamplingParams
from corl.studies.tiny_vl.families import build_vl_family, save_vl
from corl.studies.tiny_vl.task import make_split
from corl.tracking.metrics import read_metrics
from corl.trainer import Agent
from corl.trainer.agent import vision_parameters
from corl.trainer.logprobs import sequence_logprobs
from corl.vision.prompt import ImagePrompt

FAMILIES = ("qwen2vl-bpe", "llava-siglip-char")


@pytest.fixture(scope="module")
def vl_models(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("vl_models")
    out = {}
    for name in FAMILIES:
        torch.manual_seed(0)
        model, processor = build_vl_family(name)
        out[name] = save_vl(model, processor, root / name)
    return out


def _problems(n: int = 3) -> list[Problem]:
    rows = make_split("train", n, seed=3)
    return [Problem(id=str(r["id"]), texts={"problem": r["problem"]}, inputs={IMAGES_INPUT: r["images"]}) for r in rows]


def _agent(path, **grpo) -> Agent:
    model, tokenizer, processor = load_agent_policy(str(path))
    assert processor is not None
    config = AgentConfig(name="v", model=str(path), lr=1e-2, freeze_vision=grpo.pop("freeze_vision", False))
    return Agent(config, model, tokenizer, PromptTemplate("{problem}", ""), "problem", GRPOConfig(**grpo), processor=processor)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_update_scores_exactly_what_the_sampler_sampled(vl_models, family, temperature):
    """The trainer's log-probs (images, left padding, M-RoPE positions, the cut at the longest
    completion) equal the sampler's, token for token: otherwise the update trains another policy."""
    agent = _agent(vl_models[family])
    problems = _problems(3)
    prompts = agent.prompts(problems)
    assert all(isinstance(p, ImagePrompt) and len(p.images) == 1 for p in prompts)
    assert all(p.text.count(agent.processor.image_token) == 1 for p in prompts)
    torch.manual_seed(0)
    rollout = agent.sample(problems, 4, SamplingParams(temperature=temperature, max_new_tokens=10))
    assert rollout.vision is not None and len(rollout.vision) == 3  # prompt-level, not repeated K times
    assert rollout.input_ids.shape[0] == 12 and len(rollout.texts) == 12
    rows = torch.tensor([5, 0, 11, 6])  # any rows, any order: each gathers its own prompt's image
    width = int(rollout.completion_lengths[rows].max())
    with torch.no_grad():
        trained = sequence_logprobs(agent.model, rollout, rows, temperature, width)
    mask = rollout.completion_mask[rows, :width].bool()
    sampled = rollout.sampling_logprobs[rows, :width]
    assert torch.allclose(trained[mask], sampled[mask], atol=1e-5), (trained - sampled).abs()[mask].max()


def test_the_image_matters_to_the_scores(vl_models):
    """Swapping two prompts' images changes the trainer's log-probs of the same tokens."""
    agent = _agent(vl_models["qwen2vl-bpe"])
    problems = _problems(2)
    torch.manual_seed(0)
    rollout = agent.sample(problems, 2, SamplingParams(temperature=1.0, max_new_tokens=8))
    rows = torch.arange(4)
    with torch.no_grad():
        own = sequence_logprobs(agent.model, rollout, rows, 1.0)
        rollout.vision = rollout.vision.select([1, 0])  # prompt 0 now carries prompt 1's image and vice versa
        swapped = sequence_logprobs(agent.model, rollout, rows, 1.0)
    mask = rollout.completion_mask.bool()
    assert not torch.allclose(own[mask], swapped[mask], atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("freeze", [False, True])
def test_an_update_moves_the_language_and_vision_parts_unless_frozen(vl_models, family, freeze):
    agent = _agent(vl_models[family], freeze_vision=freeze)
    vision = {id(p) for p in vision_parameters(agent.model)}
    before = {n: p.detach().clone() for n, p in agent.model.named_parameters()}
    torch.manual_seed(0)
    rollout = agent.sample(_problems(2), 4, SamplingParams(temperature=1.0, max_new_tokens=8))
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])  # [B, K]
    stats = agent.update(rollout, rewards, SamplingParams(temperature=1.0, max_new_tokens=8))
    assert stats.optimizer_steps == 1 and stats.active_sequences == 8
    moved = {n for n, p in agent.model.named_parameters() if not torch.equal(p.detach(), before[n])}
    params = dict(agent.model.named_parameters())
    moved_vision = {n for n in moved if id(params[n]) in vision}
    assert moved - moved_vision, "no language-model parameter changed"
    if freeze:
        assert not moved_vision, f"frozen vision parameters changed: {sorted(moved_vision)[:3]}"
        assert all(not params[n].requires_grad for n in params if id(params[n]) in vision)
    else:
        # the tower's own layers, not only the projector, get gradient through the image tokens
        tower = "visual.blocks" if family == "qwen2vl-bpe" else "vision_tower.encoder"
        assert any(tower in n for n in moved_vision), f"no {tower} parameter changed"


def test_freeze_vision_on_a_text_model_is_refused(tiny_models):
    model, tokenizer, processor = load_agent_policy(str(tiny_models["llama-char"]))
    assert processor is None and not is_vision_model(str(tiny_models["llama-char"]))
    with pytest.raises(ValueError, match="freeze_vision"):
        Agent(AgentConfig(name="t", model="m", freeze_vision=True), model, tokenizer, PromptTemplate(), "problem", GRPOConfig())


def test_entropy_reward_reads_the_vision_logits(vl_models):
    """RENT's reward goes through the same forward as the update: [B, K] finite, not constant."""
    from corl.rewards import reward_spec

    agent = _agent(vl_models["llava-siglip-char"])
    torch.manual_seed(0)
    rollout = agent.sample(_problems(2), 3, SamplingParams(temperature=1.0, max_new_tokens=8))
    rewards = agent.logit_rewards(rollout, reward_spec("entropy").from_logits, 1.0)
    assert rewards.shape == (2, 3) and torch.isfinite(rewards).all() and rewards.std() > 0


# -- the whole trainer: a mixed cohort, checkpoints, resume ---------------------------------------------


def _config(root, vl_models, text_model, steps: int, **cohort):
    raw = {
        "output_dir": str(root / "run"),
        "agents": [
            {"name": "qwen", "model": str(vl_models["qwen2vl-bpe"]), "lr": 1e-3},
            {"name": "llava", "model": str(vl_models["llava-siglip-char"]), "lr": 1e-3},
            {"name": "text", "model": str(text_model), "lr": 1e-3},  # reads the text alone
        ],
        "data": {"train": "vtiny:train:16", "template": "{problem}", "instruction": ""},
        "cohort": {"steps": steps, "prompts_per_step": 2, "samples_per_prompt": 3, "max_new_tokens": 8, "seed": 0, **cohort},
        "logging": {"tensorboard": False, "progress": False},
    }
    return validate_config(raw)


@pytest.fixture(scope="module")
def vl_runs(tmp_path_factory, vl_models, tiny_models):
    """Entropy rewards (RENT) give every step a signal even with random models. Random models
    rarely end within 8 tokens: with truncated_answers drop (the default) every completion
    would leave the loss, so these runs keep them."""
    root = tmp_path_factory.mktemp("vl_resume")
    full, resumed = root / "full", root / "resumed"
    text = tiny_models["llama-char"]
    opts = {"reward": "entropy", "label_source": "self", "truncated_answers": "keep"}
    launch(_config(root, vl_models, text, 3, **opts), full)
    launch(_config(root, vl_models, text, 2, **opts), resumed)
    launch(_config(root, vl_models, text, 3, **opts), resumed, resume=True)
    return full, resumed


def test_a_checkpoint_loads_with_the_auto_classes_and_its_processor(vl_runs, vl_models):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from corl.vision.processing import load_processor

    full, _ = vl_runs
    for name, family in (("qwen", "qwen2vl-bpe"), ("llava", "llava-siglip-char")):
        folder = full / "checkpoints" / "step_000003" / name
        model = AutoModelForImageTextToText.from_pretrained(folder)
        trained = load_file(str(folder / "model.safetensors"))
        initial = load_file(str(vl_models[family] / "model.safetensors"))
        assert any(not torch.equal(trained[k], initial[k]) for k in initial), f"{name} never trained"
        reloaded = dict(model.state_dict())
        assert all(torch.equal(reloaded[k], v) for k, v in trained.items() if k in reloaded)
        processor = load_processor(folder) if family == "qwen2vl-bpe" else AutoProcessor.from_pretrained(folder)
        assert processor.image_token and processor.tokenizer.decode(processor.tokenizer.encode("x=7")).strip() == "x=7"


def test_two_steps_and_a_resumed_one_equal_three_uninterrupted_steps(vl_runs):
    full, resumed = vl_runs

    def metrics(run):
        return {r["step"]: {k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(run, "train")}

    assert metrics(resumed) == metrics(full) and sorted(metrics(full)) == [1, 2, 3]
    for name in ("qwen", "llava", "text"):
        a = load_file(str(full / "checkpoints" / "step_000003" / name / "model.safetensors"))
        b = load_file(str(resumed / "checkpoints" / "step_000003" / name / "model.safetensors"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{name}: resumed weights differ"


def test_co_rl_on_the_image_task_votes_across_architectures(tmp_path, vl_models, tiny_models):
    """Peer labels between a Qwen2-VL, a LLaVA and a text agent: briefly pretrained VL agents
    write boxed answers, so the peers' majorities label some prompts and rewards flow."""
    from corl.studies.tiny_vl.pretrain import ensure_pretrained_vl

    cache = tmp_path / "cache"
    pretrained = {name: ensure_pretrained_vl(name, steps=60, batch_size=16, cache_dir=cache) for name in FAMILIES}
    cfg = _config(tmp_path, pretrained, tiny_models["llama-char"], 3, label_source="peer")
    raw = copy.deepcopy(cfg.model_dump())
    raw["cohort"]["prompts_per_step"] = 8
    raw["cohort"]["samples_per_prompt"] = 4
    raw["cohort"]["max_new_tokens"] = 16
    raw["data"]["val"] = "vtiny:validation:4"
    raw["data"]["val_size"] = 4
    last = launch(validate_config(raw), tmp_path / "run")
    rows = read_metrics(tmp_path / "run", "train")
    assert len(rows) == 3
    assert max(r["qwen/answer_rate"] for r in rows) > 0, "the pretrained Qwen2-VL agent never wrote an answer"
    assert max(r["llava/answer_rate"] for r in rows) > 0, "the pretrained LLaVA agent never wrote an answer"
    # ring qwen <- text <- llava <- qwen: llava is labelled by qwen's majorities, text by llava's
    assert any(r["llava/labeled_fraction"] > 0 for r in rows) and any(r["text/labeled_fraction"] > 0 for r in rows)
    # some completion agreed with its peer's majority while another did not: a GRPO signal from a peer
    assert any(r[f"{n}/active_sequences"] > 0 for r in rows for n in ("qwen", "llava", "text")), "no peer reward signal"
    assert "qwen/val_accuracy" in last and "llava/val_accuracy" in last and "text/val_accuracy" in last


# -- data: images and options reach the problems --------------------------------------------------------


def test_rows_with_relative_image_paths_and_a_missing_image_named_by_row(tmp_path):
    from PIL import Image

    from corl.data.rows import DataError, build_problems, load_rows

    (tmp_path / "img").mkdir()
    Image.new("RGB", (12, 9), "white").save(tmp_path / "img" / "a.png")
    path = tmp_path / "train.jsonl"
    path.write_text('{"id": "r0", "problem": "x=?", "answer": "3", "images": "img/a.png"}\n{"id": "r1", "problem": "y=?"}\n')
    problems, _ = build_problems(load_rows(str(path)), str(path), ["problem"], image_field="images")
    assert problems[0].inputs[IMAGES_INPUT] == [str(tmp_path / "img" / "a.png")]  # one image -> a list, from the file's folder
    assert IMAGES_INPUT not in problems[1].inputs  # a text-only row
    path.write_text(
        '{"id": "r0", "problem": "x=?", "images": ["img/a.png"]}\n{"id": "r1", "problem": "y=?", "images": ["img/b.png"]}\n'
    )
    with pytest.raises(DataError, match=r"row 2: image 'img/b.png'.*not found"):
        build_problems(load_rows(str(path)), str(path), ["problem"], image_field="images")


def test_a_vision_dataset_source_gives_problems_with_images_and_options(tmp_path):
    import json

    from PIL import Image

    from corl.trainer import load_train_data

    (tmp_path / "images").mkdir()
    Image.new("RGB", (16, 16), "white").save(tmp_path / "images" / "a.png")
    records = [
        {"image": "images/a.png", "problem": "<image>Find x.\nChoices:\nA:3\nB:5\nC:7", "solution": "<answer>5</answer>"},
        {"image": "images/a.png", "problem": "<image>What is the area?", "solution": "<answer> 12 </answer>"},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    cfg = validate_config(
        {
            "agents": [{"name": "a", "model": "tiny-vl:qwen2vl-bpe"}, {"name": "b", "model": "tiny-vl:llava-siglip-char"}],
            "data": {"train": f"vision:open-r1-mm:{path}"},
        }
    )
    data = load_train_data(cfg)
    first, second = data.problems
    assert first.inputs["options"] == ["3", "5", "7"] and first.inputs[IMAGES_INPUT] == [str(tmp_path / "images" / "a.png")]
    assert data.gold[first.id] == "B" and second.inputs["options"] is None and data.gold[second.id] == "12"
    # the MCQ row answers with the picked letter, whichever form the completion chose
    from corl.tasks import task_spec

    answers, keys = task_spec("math").answers(["so \\boxed{5}", "\\boxed{B}", "\\boxed{12}", "\\boxed{12.0}"], data.problems, 2)
    assert answers == [("B", "B"), ("12", "12.0")] and keys[0][0] == keys[0][1]
