"""`corl grade` on files shaped exactly as other tools write them: the same figures as corl's own shape.

Every case holds the two problems of tests/evaluation/test_grade.py (three samples each; worked out there:
avg@3 = 0.5, maj@3 = 0.5, pass@3 = 1.0), written the way one generator writes them.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from corl.cli import app

runner = CliRunner()
SAMPLES = {"p1": ["so \\boxed{4}", "\\boxed{4}.", "it is \\boxed{5}"], "p2": ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"]}
GOLD = {"p1": "4", "p2": "2"}
EXPECTED = {"avg@3": 0.5, "maj@3": 0.5, "pass@3": 1.0, "n": 2}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _gold_file(tmp_path, id_field="id"):
    return _write(
        tmp_path / "gold.jsonl", [{id_field: pid, "problem": f"question {pid}", "answer": a} for pid, a in GOLD.items()]
    )


def _grade(*args):
    result = runner.invoke(app, ["grade", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _chat_completion(pid, texts):
    """A Chat Completions response as the OpenAI SDK's `.model_dump()` writes it (n = len(texts))."""
    return {
        "id": f"chatcmpl-{pid}xyz",
        "object": "chat.completion",
        "created": 1764900000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": t, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": "stop",
            }
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
        "system_fingerprint": "fp_0123456789",
    }


def test_one_row_per_sample_is_grouped_by_id_with_a_note(tmp_path):
    rows = [{"id": pid, "completion": t, "answer": GOLD[pid]} for pid, texts in SAMPLES.items() for t in texts]
    out, err = _grade(_write(tmp_path / "dump.jsonl", rows[::-1]))  # any order: samples follow their id
    assert (out["n"], out["k"]) == (2, 3) and out["models"]["dump"] == EXPECTED
    assert "6 rows share 'id': graded as 2 problems of 3 samples each" in " ".join(err.split())


def test_one_row_per_sample_without_ids_is_grouped_by_prompt(tmp_path):
    """TRL's conversational shape: prompt and completion are message lists; no id, so the prompt is the problem."""
    rows = [
        {
            "prompt": [{"role": "system", "content": "Box the answer."}, {"role": "user", "content": f"question {pid}"}],
            "completion": [{"role": "assistant", "content": t}],
            "answer": GOLD[pid],
        }
        for pid, texts in SAMPLES.items()
        for t in texts
    ]
    out, err = _grade(_write(tmp_path / "trl.jsonl", rows), "--format", "trl")
    assert out["models"]["trl"] == EXPECTED
    assert "graded as 2 problems" in err


def test_a_gold_that_differs_within_one_problem_is_refused(tmp_path):
    rows = [{"id": "p1", "completion": "\\boxed{4}", "answer": "4"}, {"id": "p1", "completion": "\\boxed{4}", "answer": "5"}]
    result = runner.invoke(app, ["grade", _write(tmp_path / "d.jsonl", rows)])
    assert result.exit_code == 2
    assert "d.jsonl line 2: id 'p1' has gold '5' here and '4' at" in " ".join(result.output.split())


def test_openai_chat_completions_with_gold_by_line_order(tmp_path):
    rows = [_chat_completion(pid, texts) for pid, texts in SAMPLES.items()]
    out, _ = _grade(_write(tmp_path / "openai.jsonl", rows), "--format", "openai", "--answers", _gold_file(tmp_path))
    assert out["models"] == {"gpt-4o-mini-2024-07-18": EXPECTED}  # the response's model names the generator


def test_openai_legacy_completions_through_a_dotted_path(tmp_path):
    rows = [
        {"id": f"cmpl-{pid}", "object": "text_completion", "choices": [{"index": i, "text": t} for i, t in enumerate(texts)]}
        for pid, texts in SAMPLES.items()
    ]
    rows = [{**r, "answer": GOLD[pid]} for r, pid in zip(rows, SAMPLES)]
    out, _ = _grade(_write(tmp_path / "c.jsonl", rows), "--completion-field", "choices.*.text", "--id-field", "id")
    assert out["models"]["c"] == EXPECTED


def test_openai_batch_output_joined_on_custom_id(tmp_path):
    rows = [
        {
            "id": f"batch_req_{i}",
            "custom_id": pid,
            "response": {"status_code": 200, "request_id": f"req_{i}", "body": _chat_completion(pid, texts)},
            "error": None,
        }
        for i, (pid, texts) in enumerate(reversed(SAMPLES.items()))  # batch output comes in any order
    ]
    out, _ = _grade(_write(tmp_path / "batch.jsonl", rows), "--format", "openai-batch", "--answers", _gold_file(tmp_path))
    assert out["models"]["batch"] == EXPECTED
    rows[0]["custom_id"] = "p9"
    result = runner.invoke(
        app, ["grade", _write(tmp_path / "b.jsonl", rows), "--format", "openai-batch", "--answers", _gold_file(tmp_path)]
    )
    assert result.exit_code == 2 and "b.jsonl line 1: custom_id 'p9' has no row in --answers" in " ".join(result.output.split())


def test_vllm_request_outputs(tmp_path):
    """`LLM.generate(..., SamplingParams(n=3))`'s RequestOutput as a dict, one per line, gold joined on request_id."""
    rows = [
        {
            "request_id": pid,
            "prompt": f"question {pid}",
            "prompt_token_ids": [1, 2, 3],
            "outputs": [
                {
                    "index": i,
                    "text": t,
                    "token_ids": [5, 6],
                    "cumulative_logprob": None,
                    "logprobs": None,
                    "finish_reason": "stop",
                }
                for i, t in enumerate(texts)
            ],
            "finished": True,
        }
        for pid, texts in SAMPLES.items()
    ]
    out, _ = _grade(_write(tmp_path / "vllm.jsonl", rows), "--format", "vllm", "--answers", _gold_file(tmp_path))
    assert out["models"]["vllm"] == EXPECTED


def test_lm_eval_log_samples_one_filter_and_gsm8k_targets(tmp_path):
    """lm-eval writes one row per (document, filter), the K repeats in resps[0], GSM8K's target a worked solution."""
    rows = []
    for doc_id, (pid, texts) in enumerate(SAMPLES.items()):
        for flt in ("strict-match", "flexible-extract"):
            rows.append(
                {
                    "doc_id": doc_id,
                    "doc": {"question": f"question {pid}", "answer": f"work <<{GOLD[pid]}>>\n#### {GOLD[pid]}"},
                    "target": f"work <<{GOLD[pid]}>>\n#### {GOLD[pid]}",
                    "arguments": {
                        "gen_args_0": {"arg_0": f"Question: question {pid}\nAnswer:", "arg_1": {"until": ["Question:"]}}
                    },
                    "resps": [texts],
                    "filtered_resps": [texts[0]],
                    "filter": flt,
                    "metrics": ["exact_match"],
                    "doc_hash": "d" * 64,
                    "prompt_hash": "p" * 64,
                    "target_hash": "t" * 64,
                    "exact_match": 0.0,
                }
            )
    out, err = _grade(_write(tmp_path / "samples_gsm8k_2026-12-05T01-00-00.jsonl", rows), "--format", "lm-eval")
    assert (out["n"], out["k"]) == (2, 3)
    assert next(iter(out["models"].values())) == EXPECTED
    assert "rows of filter 'strict-match' read (1 other filter(s) repeat the same samples)" in " ".join(err.split())


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--format", "nope"], "--format must be one of openai, openai-batch, vllm, lm-eval, trl, got 'nope'"),
        (["--completion-field", "choices.*.message"], "holds a value of type dict"),
        (["--completion-field", "choices.*.msg.content"], "no key 'msg' (keys there: finish_reason, index, logprobs, message)"),
        (["--format", "vllm"], "none of outputs.*.text"),
    ],
)
def test_wrong_paths_and_formats_say_what_is_there(tmp_path, args, said):
    rows = [{**_chat_completion("p1", ["x"]), "answer": "4"}]
    rows[0]["choices"][0]["message"] = {"role": "assistant", "parts": "x"}  # no content: a shape corl cannot read
    if "--format" in args and args[1] == "vllm":
        rows = [{"choices_": 1, "answer": "4"}]
    result = runner.invoke(app, ["grade", _write(tmp_path / "o.jsonl", rows), *args])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())
    assert "Traceback" not in result.output
