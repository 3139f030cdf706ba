"""Model cards: the Hugging Face card of each agent says its method, its teacher, its data and scores."""

from __future__ import annotations

import pytest
import yaml
from huggingface_hub import ModelCard

from corl.checkpoints.model_card import NO_SUITE, method_name, model_card, record_suite_results, teachers_text
from corl.config import validate_config


def _cfg(label_source: str = "peer", agents: int = 3, reward: str = "agreement", **data):
    raw = {
        "agents": [{"name": f"a{i}", "model": "Qwen/Qwen2.5-0.5B" if i == 0 else f"/models/m{i}"} for i in range(agents)],
        "data": {"train": "org/train-set", "val": "val.jsonl", "val_size": 16, **data},
        "cohort": {"label_source": label_source, "reward": reward, "steps": 40},
    }
    return validate_config(raw)


def header(text: str) -> dict:
    """The YAML between the first two '---' lines, read by yaml itself (not by huggingface_hub)."""
    _, head, _ = text.split("---\n", 2)
    return yaml.safe_load(head)


def test_the_card_header_parses_and_names_base_model_library_and_tags():
    cfg = _cfg()
    card = str(model_card(cfg, 0, 20, {"step": 20, "a0/val_accuracy": 0.25, "a1/val_accuracy": 0.5}))
    meta = header(card)
    assert meta["base_model"] == "Qwen/Qwen2.5-0.5B"  # a Hub id; a local folder is no base_model for the Hub
    assert meta["library_name"] == "transformers" and meta["datasets"] == ["org/train-set"]
    assert {"corl", "label-free", "grpo", "corl-label-peer", "corl-reward-agreement"} <= set(meta["tags"])
    result = meta["model-index"][0]["results"][0]
    assert meta["model-index"][0]["name"] == "a0" and result["metrics"][0]["value"] == 0.25
    assert "base_model" not in header(str(model_card(cfg, 1, 20)))  # /models/m1: local
    assert ModelCard(card).data.base_model == "Qwen/Qwen2.5-0.5B"  # and the Hub's own reader agrees


def test_the_card_names_the_peer_that_taught_the_agent_and_the_method():
    # the ring with 3 agents: a0 is taught by a2, a1 by a0, a2 by a1
    cfg = _cfg()
    assert [teachers_text(cfg, n).split(":")[0] for n in range(3)] == ["`a2`", "`a0`", "`a1`"]
    text = str(model_card(cfg, 0, 20, {"step": 20, "a0/val_accuracy": 0.25}))
    assert "**Taught by** `a2`: its majority answer is this agent's label." in text
    assert "**Label source** `peer`: Co-RL ring" in text and "with Co-RL ring" in text
    assert "| a0 (this model) | `Qwen/Qwen2.5-0.5B` | a2 |" in text and "| a1 | `/models/m1` | a0 |" in text
    assert "| steps | 20 of 40 |" in text and "after step 20" in text and "| **a0** | 0.250 |" in text
    assert NO_SUITE in text


@pytest.mark.parametrize(
    ("source", "reward", "teacher", "method"),
    [
        ("ring2", "agreement", "`a2` and `a1`: their pooled majority", "ring2"),
        ("self", "agreement", "itself: its own majority answer", "TTRL"),
        ("truth", "agreement", "no agent: GT-Reward", "GT-Reward"),
        ("ema", "agreement", "its own EMA copy (momentum 0.99)", "Co-rewarding-II"),
        ("self", "entropy", "itself: its own majority answer", "RENT"),
    ],
)
def test_every_label_source_says_who_teaches(source, reward, teacher, method):
    cfg = _cfg(source, reward=reward)
    assert teachers_text(cfg, 0).startswith(teacher)
    assert method_name(cfg) == method
    tags = header(str(model_card(cfg, 0, 1)))["tags"]
    assert ("label-free" in tags) == (source != "truth")


def test_suite_results_are_added_to_a_corl_card(tmp_path):
    cfg = _cfg()
    folder = tmp_path / "a0"
    folder.mkdir()
    (folder / "README.md").write_text(str(model_card(cfg, 0, 40)))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "README.md").write_text("# someone else's card\n")
    results = {
        "suite": "math",
        "engine": "hf",
        "protocols": {"amc23": {"title": "AMC23", "metric": "avg@16"}},
        "models": {
            str(folder): {"amc23": {"status": "ok", "value": 0.4, "ci95": [0.3, 0.5]}, "average": {"value": 0.4}},
            str(tmp_path / "other"): {"amc23": {"status": "ok", "value": 0.1, "ci95": None}},
        },
    }
    assert record_suite_results(results) == [folder / "README.md"]
    text = (folder / "README.md").read_text()
    assert "| AMC23 | avg@16 | 0.400 | [0.300, 0.500] |" in text and NO_SUITE not in text
    metrics = [r["metrics"][0] for r in header(text)["model-index"][0]["results"]]
    assert {"type": "avg@16", "value": 0.4} in [{k: m[k] for k in ("type", "value")} for m in metrics]
    assert (tmp_path / "other" / "README.md").read_text() == "# someone else's card\n"  # left alone
    record_suite_results(results)  # again: the section is replaced, not repeated
    assert (folder / "README.md").read_text().count("| AMC23 |") == 1
