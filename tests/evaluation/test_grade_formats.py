"""`corl grade` on files shaped exactly as other tools write them: the same figures as corl's own shape, no --format.

Every case holds the two problems of tests/evaluation/test_grade.py (three samples each; worked out there:
avg@3 = 0.5, maj@3 = 0.5, pass@3 = 1.0, with their standard errors and intervals), written the way one
generator writes them. The shapes follow each tool's own documentation and source:

- OpenAI SDK: `ChatCompletion.model_dump()` (openai-python `types/chat/chat_completion.py`), the Responses
  API's `Response.model_dump()` (`types/responses/response.py`: output items, a reasoning item first);
- Batch API output lines (`{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`),
  which `vllm run-batch` also writes (vLLM's examples/offline_inference/openai_batch/README.md);
- vLLM `LLM.generate`'s RequestOutput (`request_id` is `str(next(self.request_counter))`: "0", "1", ...);
- lm-eval `--log_samples` (`lm_eval/evaluator.py` and `loggers/evaluation_tracker.py`: one row per document
  and filter, `resps` a list of each request's responses, `arguments` as gen_args_i/arg_j, `target` a string);
- TRL GRPOTrainer's `log_completions` (`trl/trainer/grpo_trainer.py`: OUTPUT_DIR/completions/completions_%05d.parquet
  per logged step, columns step, prompt, completion, one per reward function, advantage; the same frame logged as
  the W&B table "completions", stored as {"columns", "data"} (wandb `data_types/table.py`)).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from corl.cli import app

runner = CliRunner()
SAMPLES = {"p1": ["so \\boxed{4}", "\\boxed{4}.", "it is \\boxed{5}"], "p2": ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"]}
GOLD = {"p1": "4", "p2": "2"}
PROBLEM = {"p1": "Tom has 3 apples and buys 1 more. How many apples?", "p2": "Half of 4 is what number?"}
FIGURES = {"avg@3": 0.5, "maj@3": 0.5, "pass@3": 1.0, "n": 2}
SE = {"avg@3": 1 / 6, "maj@3": 0.5, "pass@3": 0.0}  # by hand in tests/evaluation/test_grade.py
CI95 = {"avg@3": [0.5 - 1.959964 / 6, 0.5 + 1.959964 / 6], "maj@3": [0.0, 1.0], "pass@3": [1.0, 1.0]}


def said(text: str) -> str:
    return " ".join(text.split())


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _gold_file(tmp_path, id_field="id"):
    """A dataset file as corl's data are (math500-like ids), the problems' text in 'problem'."""
    rows = [{id_field: f"test/algebra/{pid}.json", "problem": PROBLEM[pid], "answer": a} for pid, a in GOLD.items()]
    return _write(tmp_path / "gold.jsonl", rows)


def _grade(*args):
    result = runner.invoke(app, ["grade", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), said(result.stderr)


def _assert_expected(entry, figures=FIGURES):
    assert {m: entry[m] for m in figures} == figures
    assert entry["se"] == pytest.approx(SE) and entry["ci95"] == {m: pytest.approx(v) for m, v in CI95.items()}


def _message(text):
    return {"role": "assistant", "content": text, "refusal": None, "annotations": [], "audio": None,
            "function_call": None, "tool_calls": None}  # fmt: skip


def _chat_completion(pid, texts):
    """A Chat Completions response as the OpenAI SDK's `.model_dump()` writes it (n = len(texts))."""
    return {
        "id": f"chatcmpl-{pid}xyz",
        "object": "chat.completion",
        "created": 1764900000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": i, "message": _message(t), "logprobs": None, "finish_reason": "stop"} for i, t in enumerate(texts)],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
        "service_tier": "default",
        "system_fingerprint": "fp_0123456789",
    }


def _response(n, text):
    """A Responses API object as `client.responses.create(...).model_dump()` writes it (a reasoning model)."""
    return {
        "id": f"resp_{n:04d}",
        "created_at": 1764900000.0,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "model": "o4-mini-2025-04-16",
        "object": "response",
        "output": [
            {"id": f"rs_{n}", "summary": [], "type": "reasoning", "content": None, "encrypted_content": None, "status": None},
            {
                "id": f"msg_{n}",
                "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
                "role": "assistant",
                "status": "completed",
                "type": "message",
            },
        ],
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "status": "completed",
        "usage": {"input_tokens": 20, "output_tokens": 30, "total_tokens": 50},
    }


def test_one_row_per_sample_is_grouped_by_id_with_a_note(tmp_path):
    rows = [{"id": pid, "completion": t, "answer": GOLD[pid]} for pid, texts in SAMPLES.items() for t in texts]
    out, err = _grade(_write(tmp_path / "dump.jsonl", rows[::-1]))  # any order: samples follow their id
    assert (out["n"], out["k"]) == (2, 3)
    _assert_expected(out["models"]["dump"])
    assert "6 rows share 'id': graded as 2 problems of 3 samples each" in err


def test_ids_with_a_sample_suffix_are_one_problems_samples(tmp_path):
    """v12-s0, v12-s1, ...: each id unique, as a Batch custom_id must be; one gold per stripped id tells the grouping."""
    rows = [
        {"id": f"v{pid}-s{j}", "completion": t, "answer": GOLD[pid]}
        for pid, texts in SAMPLES.items()
        for j, t in enumerate(texts)
    ]
    out, err = _grade(_write(tmp_path / "s.jsonl", rows))
    _assert_expected(out["models"]["s"])
    assert "ids end in a sample number ('vp1-s0' is a sample of 'vp1'): 6 rows graded as 2 problems of 3 samples" in err
    # ids that merely end in a number are problems of their own, even where they share a gold (a yes/no set) ...
    rows = [{"id": f"q-{i}", "completion": f"\\boxed{{{i % 2}}}", "answer": "1"} for i in range(1, 5)]
    out, _ = _grade(_write(tmp_path / "q.jsonl", rows))
    assert (out["n"], out["k"], out["models"]["q"]["avg@1"]) == (4, 1, 0.5)
    # ... and tagged ones whose stripped ids would hold different gold
    rows = [{"id": f"q-s{i}", "completion": f"\\boxed{{{i}}}", "answer": str(i)} for i in range(1, 5)]
    out, _ = _grade(_write(tmp_path / "qs.jsonl", rows))
    assert (out["n"], out["k"], out["models"]["qs"]["avg@1"]) == (4, 1, 1.0)
    # --id-field takes the ids as they are
    rows = [
        {"id": f"v{pid}-s{j}", "completion": t, "answer": GOLD[pid]}
        for pid, texts in SAMPLES.items()
        for j, t in enumerate(texts)
    ]
    out, _ = _grade(_write(tmp_path / "t.jsonl", rows), "--id-field", "id")
    assert (out["n"], out["k"]) == (6, 1)


def test_one_row_per_sample_without_ids_is_grouped_by_prompt(tmp_path):
    """TRL's conversational dataset shape: prompt and completion are message lists; no id, so the prompt is the problem."""
    rows = [
        {
            "prompt": [{"role": "system", "content": "Box the answer."}, {"role": "user", "content": PROBLEM[pid]}],
            "completion": [{"role": "assistant", "content": t}],
            "answer": GOLD[pid],
        }
        for pid, texts in SAMPLES.items()
        for t in texts
    ]
    out, err = _grade(_write(tmp_path / "trl.jsonl", rows))
    _assert_expected(out["models"]["trl"])
    assert "graded as 2 problems" in err


def test_a_transcript_is_graded_on_its_last_assistant_turn(tmp_path):
    """The answer is the last thing the assistant said: not its first turn, not a later user or tool turn."""
    revised = [{"role": "assistant", "content": "\\boxed{5}"}, {"role": "user", "content": "Check it."},
               {"role": "assistant", "content": "Sorry: \\boxed{4}"}]  # fmt: skip
    thanked = [{"role": "assistant", "content": "\\boxed{4}"}, {"role": "user", "content": "\\boxed{7}, thanks"}]
    rows = [{"id": "a", "messages": revised, "answer": "4"}, {"id": "b", "messages": thanked, "answer": "4"}]
    out, _ = _grade(
        _write(tmp_path / "chat.jsonl", rows), "--completion-field", "messages", "--records", str(tmp_path / "r.jsonl")
    )
    assert out["models"]["chat"]["avg@1"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [r["samples"][0]["completion"] for r in records] == ["Sorry: \\boxed{4}", "\\boxed{4}"]


def test_a_gold_that_differs_within_one_problem_is_refused(tmp_path):
    rows = [{"id": "p1", "completion": "\\boxed{4}", "answer": "4"}, {"id": "p1", "completion": "\\boxed{4}", "answer": "5"}]
    result = runner.invoke(app, ["grade", _write(tmp_path / "d.jsonl", rows)])
    assert result.exit_code == 2
    assert "d.jsonl line 2: id 'p1' has gold '5' here and '4' at" in said(result.output)


def test_openai_chat_completions_n_choices_no_format(tmp_path):
    rows = [_chat_completion(pid, texts) for pid, texts in SAMPLES.items()]
    out, err = _grade(_write(tmp_path / "openai.jsonl", rows), "--answers", _gold_file(tmp_path))
    assert list(out["models"]) == ["gpt-4o-mini-2024-07-18"]  # the response's model names the generator
    _assert_expected(out["models"]["gpt-4o-mini-2024-07-18"])
    assert "read as --format openai ('choices': Chat Completions" in err
    same, _ = _grade(_write(tmp_path / "openai.jsonl", rows), "--format", "openai", "--answers", _gold_file(tmp_path))
    assert same["models"] == out["models"]


def test_openai_calls_of_one_sample_each_are_k_consecutive_rows(tmp_path):
    """K calls per problem (n = 1), one response a line: no id tells the problem (a response's id is its own)."""
    rows = [_chat_completion(f"{pid}{j}", [t]) for pid, texts in SAMPLES.items() for j, t in enumerate(texts)]
    path = _write(tmp_path / "calls.jsonl", rows)
    out, err = _grade(path, "--answers", _gold_file(tmp_path))
    _assert_expected(out["models"]["gpt-4o-mini-2024-07-18"])
    assert "each 3 consecutive rows are one problem's samples (6 rows for the 2 problems of --answers)" in err
    out, err = _grade(path, "--answers", _gold_file(tmp_path), "--samples-per-problem", "3")
    _assert_expected(out["models"]["gpt-4o-mini-2024-07-18"])
    assert "(--samples-per-problem 3)" in err


def test_openai_responses_api_objects_with_reasoning_items(tmp_path):
    rows = [_response(10 * i + j, t) for i, texts in enumerate(SAMPLES.values()) for j, t in enumerate(texts)]
    out, err = _grade(_write(tmp_path / "resp.jsonl", rows), "--answers", _gold_file(tmp_path), "--samples-per-problem", "3")
    _assert_expected(out["models"]["o4-mini-2025-04-16"])
    assert "'object': 'response': Responses API" in err


def test_openai_legacy_completions_through_a_dotted_path(tmp_path):
    rows = [
        {
            "id": pid,
            "object": "text_completion",
            "choices": [{"index": i, "text": t} for i, t in enumerate(texts)],
            "answer": GOLD[pid],
        }
        for pid, texts in SAMPLES.items()
    ]
    out, _ = _grade(_write(tmp_path / "c.jsonl", rows), "--completion-field", "choices.*.text", "--id-field", "id")
    _assert_expected(out["models"]["c"])


def _batch_line(i, custom_id, body):
    if body is None:  # a request that failed: no response, the error says why
        return {"id": f"batch_req_{i}", "custom_id": custom_id, "response": None,
                "error": {"code": "server_error", "message": "The server had an error"}}  # fmt: skip
    return {"id": f"batch_req_{i}", "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": f"req_{i}", "body": body}, "error": None}  # fmt: skip


def test_openai_batch_output_with_sample_suffixes_and_a_failed_request(tmp_path):
    """K requests per problem (custom_id must be unique: p1-s0, p1-s1, ...), in any order; the wrong third sample of
    p1 is a failed request here: an empty sample, graded wrong, and said."""
    rows = []
    for pid, texts in SAMPLES.items():
        for j, t in enumerate(texts):
            body = None if (pid, j) == ("p1", 2) else _chat_completion(f"{pid}{j}", [t])
            rows.append(_batch_line(len(rows), f"test/algebra/{pid}.json-s{j}", body))
    rows = rows[3:] + rows[:3]
    out, err = _grade(_write(tmp_path / "batch.jsonl", rows), "--answers", _gold_file(tmp_path))
    _assert_expected(out["models"]["batch"])
    assert "read as --format openai-batch" in err and "1 sample(s) hold no text (a failed request" in err
    assert "'test/algebra/p2.json-s0' is a sample of 'test/algebra/p2.json'" in err


def test_openai_batch_output_joined_on_custom_id(tmp_path):
    rows = [
        _batch_line(i, f"test/algebra/{pid}.json", _chat_completion(pid, texts))
        for i, (pid, texts) in enumerate(reversed(SAMPLES.items()))
    ]
    out, _ = _grade(_write(tmp_path / "batch.jsonl", rows), "--format", "openai-batch", "--answers", _gold_file(tmp_path))
    _assert_expected(out["models"]["batch"])
    rows[0]["custom_id"] = "p9"
    result = runner.invoke(app, ["grade", _write(tmp_path / "b.jsonl", rows), "--answers", _gold_file(tmp_path)])
    assert result.exit_code == 2 and "b.jsonl line 1: custom_id 'p9' has no row in --answers" in said(result.output)


def _request_output(request_id, prompt, texts):
    """`LLM.generate`'s RequestOutput as a dict (its fields as vLLM's outputs.py names them)."""
    outputs = [{"index": i, "text": t, "token_ids": [5, 6], "cumulative_logprob": None, "logprobs": None,
                "finish_reason": "stop", "stop_reason": None} for i, t in enumerate(texts)]  # fmt: skip
    return {"request_id": request_id, "prompt": prompt, "prompt_token_ids": [1, 2, 3], "prompt_logprobs": None,
            "outputs": outputs, "finished": True, "num_cached_tokens": 0}  # fmt: skip


def _template(pid):
    return f"<|im_start|>user\n{PROBLEM[pid]}\nPut the final answer in \\boxed{{}}.<|im_end|>\n<|im_start|>assistant\n"


def test_vllm_request_outputs_are_joined_on_the_prompt_never_on_request_id(tmp_path):
    """request_id is vLLM's counter ("0", "1"): joining it to the gold file's ids failed (the README's own example)."""
    rows = [_request_output(str(i), _template(pid), texts) for i, (pid, texts) in enumerate(SAMPLES.items())]
    path = _write(tmp_path / "vllm.jsonl", rows)
    out, err = _grade(path, "--answers", _gold_file(tmp_path))
    _assert_expected(out["models"]["vllm"])
    assert "read as --format vllm ('outputs' with 'text'" in err and "gold joined on the prompt ('problem' of" in err
    same, _ = _grade(path, "--format", "vllm", "--answers", _gold_file(tmp_path))
    assert same["models"] == out["models"]
    # n = 1 and the prompts repeated K times (`llm.generate(prompts * 3)`): interleaved rows, grouped by prompt
    rows = [_request_output(str(2 * j + i), _template(pid), [SAMPLES[pid][j]]) for j in range(3) for i, pid in enumerate(SAMPLES)]
    out, err = _grade(_write(tmp_path / "vllm_n1.jsonl", rows), "--answers", _gold_file(tmp_path))
    _assert_expected(out["models"]["vllm_n1"])
    assert "6 rows share 'prompt': graded as 2 problems of 3 samples each" in err


def test_the_prompt_join_takes_the_longest_problem_inside_a_prompt_and_names_a_prompt_with_none(tmp_path):
    """A problem text may hold another (p1's inside p3's): the longest inside the prompt is its problem. Prompts that
    hold no problem text at all (rephrased) are joined by order; some with and some without is an error."""
    problems = {"p1": "Half of 4 is what number?", "p3": "Half of 4 is what number? Now add 5."}
    gold = _write(
        tmp_path / "g.jsonl", [{"id": pid, "problem": text, "answer": a} for (pid, text), a in zip(problems.items(), "27")]
    )
    rows = [
        _request_output(str(i), f"Q: {problems[pid]}\nA:", [f"\\boxed{{{a}}}"])
        for i, (pid, a) in enumerate([("p3", 7), ("p1", 2)])
    ]
    out, _ = _grade(_write(tmp_path / "v.jsonl", rows), "--answers", gold)
    assert out["models"]["v"]["avg@1"] == 1.0  # p3's prompt holds p1's text too: joined to p1 it would be wrong
    rephrased = [_request_output(str(i), f"Say: {a} halves", [f"\\boxed{{{a}}}"]) for i, a in enumerate("27")]
    out, err = _grade(_write(tmp_path / "r.jsonl", rephrased), "--answers", gold)
    assert out["models"]["r"]["avg@1"] == 1.0 and "gold joined" not in err  # by order: 2 then 7
    result = runner.invoke(app, ["grade", _write(tmp_path / "m.jsonl", [rows[0], rephrased[1]]), "--answers", gold])
    assert result.exit_code == 2
    assert "m.jsonl line 2: no problem of --answers" in said(result.output) and "though 1 other rows' are" in said(result.output)


def _lm_eval_rows(pid_texts):
    rows = []
    for doc_id, (pid, texts) in enumerate(pid_texts):
        target = f"work <<{GOLD[pid]}>>\n#### {GOLD[pid]}"
        for flt in ("strict-match", "flexible-extract"):
            rows.append(
                {
                    "doc_id": doc_id,
                    "doc": {"question": PROBLEM[pid], "answer": target},
                    "target": target,
                    "arguments": {
                        "gen_args_0": {"arg_0": f"Question: {PROBLEM[pid]}\nAnswer:", "arg_1": {"until": ["Question:"]}}
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
    return rows


def test_lm_eval_log_samples_one_filter_and_gsm8k_targets(tmp_path):
    """lm-eval writes one row per (document, filter), the K repeats in resps[0], GSM8K's target a worked solution."""
    path = _write(tmp_path / "samples_gsm8k_2026-12-05T01-00-00.jsonl", _lm_eval_rows(SAMPLES.items()))
    out, err = _grade(path)
    assert (out["n"], out["k"]) == (2, 3)
    _assert_expected(next(iter(out["models"].values())))
    assert "read as --format lm-eval ('doc_id' and 'resps'" in err
    assert "rows of filter 'strict-match' read (1 other filter(s) repeat the same samples)" in err


def _trl_frame(step, right):
    """One logged step of GRPOTrainer: its prompts (decoded with the chat template's text), completions, rewards."""
    import pandas as pd

    rows = []
    for pid, texts in SAMPLES.items():
        for t in texts if not right else [f"\\boxed{{{GOLD[pid]}}}"] * 3:
            prompt = f"system\nYou are a helpful assistant.\nuser\n{PROBLEM[pid]}\nassistant\n"
            rows.append({"step": step, "prompt": prompt, "completion": t, "accuracy_reward": 0.0, "advantage": 0.0})
    return pd.DataFrame(rows)


def test_trl_completion_logs_are_graded_per_step(tmp_path):
    """Two logged steps with the same prompts: one figure per step (k = 3), never one problem of 6 samples."""
    folder = tmp_path / "out" / "completions"
    folder.mkdir(parents=True)
    frames = [_trl_frame(10, right=False), _trl_frame(20, right=True)]
    for frame in frames:
        frame.to_parquet(folder / f"completions_{frame['step'][0]:05d}.parquet")
    gold = _gold_file(tmp_path)
    out, err = _grade(str(folder), "--answers", gold)
    assert (out["n"], out["k"]) == (2, 3) and list(out["models"]) == ["step 10", "step 20"]
    _assert_expected(out["models"]["step 10"])
    assert {m: out["models"]["step 20"][m] for m in FIGURES} == {"avg@3": 1.0, "maj@3": 1.0, "pass@3": 1.0, "n": 2}
    assert "read 2 files of" in err and "read as --format trl" in err and "gold joined on the prompt" in err
    # the W&B table TRL logs (the same frame, as wandb stores a Table: columns and rows as lists)
    table = {"columns": list(frames[0].columns), "data": [list(r) for f in frames for r in f.itertuples(index=False)]}
    (tmp_path / "completions_20_1a2b.table.json").write_text(json.dumps({**table, "_type": "table", "ncols": 5, "nrows": 12}))
    again, _ = _grade(str(tmp_path / "completions_20_1a2b.table.json"), "--answers", gold)
    assert again["models"] == out["models"]


@pytest.mark.parametrize(
    ("rows", "args", "expected"),
    [
        (
            [_chat_completion("p1", ["x"])],
            ["--format", "nope"],
            "--format must be one of openai, openai-batch, vllm, lm-eval, trl, corl, got 'nope'",
        ),
        (
            [_chat_completion("p1", ["x"])],
            ["--format", "lm-eval"],
            "none of resps.*.* is in the row (keys: choices, created, id, model, object,",
        ),
        ([_chat_completion("p1", ["x"])], ["--format", "lm-eval"], "the rows look like --format openai ('choices'"),
        ([_chat_completion("p1", ["x"])], [], "no gold answer field (answer, gold) (columns: choices, created,"),
        ([_chat_completion("p1", ["x"])], [], "set --answer-field, or give --answers FILE"),
        ([{"text_out": "x", "answer": "4"}], [], "no completion field (completions, completion, samples"),
        ([{"text_out": "x", "answer": "4"}], [], "or --format (openai, openai-batch, vllm, lm-eval, trl, corl)"),
        ([{**_chat_completion("p1", ["x"]), "answer": "4"}], ["--completion-field", "choices.*.message.parts"], "no key 'parts'"),
        (
            [
                {
                    **_chat_completion("p1", ["x"]),
                    "answer": "4",
                    "choices": [{"index": 0, "message": _message("x"), "logprobs": 3}],
                }
            ],
            ["--completion-field", "choices.*.logprobs"],
            "'choices.*.logprobs' holds a value of type int, not a completion",
        ),
    ],
)
def test_wrong_paths_and_formats_say_what_to_give(tmp_path, rows, args, expected):
    result = runner.invoke(app, ["grade", _write(tmp_path / "o.jsonl", rows), *args])
    assert result.exit_code == 2, result.output
    assert expected in said(result.output)
    assert "Traceback" not in result.output
