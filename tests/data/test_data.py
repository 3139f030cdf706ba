"""Data loading, malformed rows, prompt templates and the stateless batch order."""

import json

import pytest

from corl.data.rows import DataError, PromptTemplate, attach_wording, batch_indices, build_problems, load_rows

ROWS = [{"id": "a", "problem": "1+1", "answer": "2"}, {"id": "b", "problem": "2+2", "answer": "4"}]


def test_jsonl_csv_parquet_load_the_same_rows(tmp_path):
    import pandas as pd

    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    pd.DataFrame(ROWS).to_csv(tmp_path / "d.csv", index=False)
    pd.DataFrame(ROWS).to_parquet(tmp_path / "d.parquet")
    (tmp_path / "d.json").write_text(json.dumps(ROWS))
    for name in ("d.jsonl", "d.csv", "d.parquet", "d.json"):
        assert load_rows(str(tmp_path / name)) == ROWS, name


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{oops\n")
    with pytest.raises(DataError, match=r"bad.jsonl' line 2: not valid JSON"):
        load_rows(str(path))
    with pytest.raises(DataError, match="not found"):
        load_rows(str(tmp_path / "missing.jsonl"))


def test_a_built_in_source_without_its_split_is_refused_never_sent_to_the_hub_loader(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise AssertionError("sent to the hub loader")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(
        DataError, match=r"'tiny' is corl's built-in data source: give tiny:<split>\[:<rows>\], e.g. tiny:test:200"
    ):
        load_rows("tiny")
    assert len(load_rows("tiny:test:3")) == 3


def test_a_relative_folder_is_refused_never_sent_to_the_hub_loader(tmp_path, monkeypatch):
    # issue 24: `data.train: mydata` (a folder here) went to datasets.load_dataset and was trained on
    folder = tmp_path / "mydata"
    folder.mkdir()
    (folder / "train.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    (folder / "notes.txt").write_text("not data")
    monkeypatch.chdir(tmp_path)
    for source in ("mydata", "./mydata", "mydata/"):
        with pytest.raises(DataError, match=r"dataset '.*mydata/?' is a folder \(data files in it: mydata/train.jsonl\)"):
            load_rows(source)
    with pytest.raises(DataError, match=r"is a folder \(no .jsonl/.json/.parquet/.csv file in it\)"):
        load_rows(str(tmp_path))
    # a missing file under a folder that is here is a path too, not a hub name "org/name"
    with pytest.raises(DataError, match=r"dataset file 'mydata/test' not found \(read as a path: 'mydata' is a folder here\)"):
        load_rows("mydata/test")
    with pytest.raises(DataError, match=r"dataset file 'a/b/c' not found"):
        load_rows("a/b/c")  # more than one slash: no hub dataset is named so


def test_a_missing_absolute_path_says_which_part_is_missing(tmp_path):
    missing = tmp_path / "nowhere" / "train.jsonl"
    with pytest.raises(DataError) as err:
        load_rows(str(missing))
    assert str(err.value) == f"dataset file '{missing}' not found ('{tmp_path}' has no 'nowhere')"


def test_a_bad_rows_number_is_its_line_number(tmp_path):
    path = tmp_path / "train.jsonl"
    lines = [json.dumps({"id": str(i), "problem": f"{i}+1"}) for i in range(4)] + [json.dumps({"id": "4", "q": "x"})]
    path.write_text("\n".join(lines) + "\n")  # line 5 has no problem
    with pytest.raises(DataError, match=r"train.jsonl' row 5: field 'problem' is missing \(columns: id, q\)"):
        build_problems(load_rows(str(path)), str(path), ["problem"])


def test_missing_field_names_file_row_field_and_columns():
    rows = [ROWS[0], {"id": "c", "question": "3+3", "answer": "6"}]
    with pytest.raises(DataError) as err:
        build_problems(rows, "x.jsonl", ["problem"])
    assert "dataset 'x.jsonl' row 2: field 'problem' is missing (columns: answer, id, question)" in str(err.value)


def test_problems_carry_no_answer_and_ids_must_be_unique():
    problems, gold = build_problems(ROWS, "x", ["problem"], answer_field="answer")
    assert not hasattr(problems[0], "answer") and problems[0].texts == {"problem": "1+1"}
    assert gold == {"a": "2", "b": "4"}
    with pytest.raises(DataError, match="row 2: id 'a' repeats row 1"):
        build_problems([ROWS[0], ROWS[0]], "x", ["problem"])


def test_decoupled_fields_read_per_agent():
    rows = [{"id": "a", "problem": "1+1", "story": "one apple and one apple"}]
    problems, _ = build_problems(rows, "x", ["problem", "story"])
    assert problems[0].texts["story"] == "one apple and one apple"


def test_prompt_template():
    assert PromptTemplate().render("1+1") == "1+1\nPlease reason step by step, and put your final answer within \\boxed{}."
    assert PromptTemplate("{problem}\n", "").render("1+1") == "1+1\n"
    with pytest.raises(ValueError, match="no chat template"):
        PromptTemplate(chat=True).render("x", tokenizer=None)


def test_batches_are_a_pure_function_of_step_and_cover_each_epoch():
    first_epoch = [i for s in range(5) for i in batch_indices(s, 10, 2, seed=3)]
    assert sorted(first_epoch) == list(range(10))
    assert batch_indices(7, 10, 4, seed=3) == batch_indices(7, 10, 4, seed=3)
    assert batch_indices(0, 10, 4, seed=3) != batch_indices(0, 10, 4, seed=4)
    # a batch crossing the epoch boundary: tail of epoch 0, head of epoch 1
    crossing = batch_indices(2, 10, 4, seed=3)
    assert crossing[:2] == first_epoch[8:10]


def test_the_embedded_task_is_a_data_source():
    rows = load_rows("tiny:test:20")
    assert len(rows) == 20 and rows[0]["id"] == "tiny/test/0" and "\\boxed{" + rows[0]["answer"] + "}" in rows[0]["solution"]
    assert load_rows("tiny:test:20") == rows
    with pytest.raises(DataError, match="tiny:<split>"):
        load_rows("tiny:nope")


def test_another_wording_keeps_the_task_inputs():
    problems, _ = build_problems(ROWS, "x", ["problem"], input_fields=["problem"])
    worded = attach_wording(
        problems, [{"id": r["id"], "alt": "other " + r["problem"]} for r in ROWS], "alt.jsonl", "alt", "alt.jsonl#alt"
    )
    assert [p.inputs for p in worded] == [p.inputs for p in problems] and problems[0].inputs
