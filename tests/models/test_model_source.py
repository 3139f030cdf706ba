"""A model that cannot be found is refused before anything loads, naming the option and what is
missing: a folder that is not there, a hub id the hub does not know, a hub that cannot be reached.
The hub is a local HTTP server speaking the hub's model-info endpoint (HF_ENDPOINT)."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from corl.config import ConfigError
from corl.models import check_model_source

WHERE = "agents.0.model (agent 'a')"


class _Hub(http.server.BaseHTTPRequestHandler):
    """GET /api/models/<id>: 200 for ids in `known`, the hub's 404 RepoNotFound otherwise."""

    known: set[str] = set()
    asked: list[str] = []

    def do_GET(self):  # noqa: N802 -- the http.server interface
        repo = self.path.split("/api/models/", 1)[-1].split("?")[0] if "/api/models/" in self.path else None
        if repo is not None:  # (the client also asks other endpoints of its own)
            self.asked.append(repo)
        if repo in self.known:
            body, status = json.dumps({"id": repo, "modelId": repo, "sha": "0" * 40, "private": False}).encode(), 200
        else:
            body, status = b'{"error": "Repository not found"}', 404
        self.send_response(status)
        if status == 404:
            self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """A local hub knowing "org/exists"; an empty hub cache; online; cwd = tmp_path."""
    _Hub.known, _Hub.asked = {"org/exists", "solo"}, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", url)  # what HF_ENDPOINT sets at import
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    yield url
    server.shutdown()


def test_a_hub_id_the_hub_knows_passes(hub):
    check_model_source("org/exists", WHERE)
    check_model_source("solo", WHERE)  # a hub id without an org ("gpt2")
    assert _Hub.asked == ["org/exists", "solo"]


def test_a_hub_id_the_hub_does_not_know_is_refused_by_name(hub):
    with pytest.raises(
        ConfigError, match=r"agents.0.model \(agent 'a'\): 'org/missing' is not a local folder .* hub has no model"
    ):
        check_model_source("org/missing", WHERE)
    assert _Hub.asked == ["org/missing"]


@pytest.mark.parametrize("model", ["ckpt/missing", "./ckpt/missing", "ckpt/run/step-2", "../nowhere/x", "~/no-such-corl-folder"])
def test_a_missing_relative_folder_is_refused_without_asking_the_hub(hub, tmp_path, model):
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(ConfigError, match=r"agents.0.model \(agent 'a'\): model folder .* not found \('.*' has no '"):
        check_model_source(model, WHERE)
    assert _Hub.asked == []  # a path, never a hub id: no request, no retries


def test_a_cached_hub_model_is_found_although_its_org_is_a_folder_here(hub, tmp_path):
    # the hub cache's own layout: refs/main names the snapshot that holds the files
    repo = tmp_path / "hub-cache" / "models--org--cached"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    (repo / "snapshots" / ("0" * 40) / "config.json").write_text("{}")
    (tmp_path / "org").mkdir()  # "org/cached" could also be read as a path
    check_model_source("org/cached", WHERE)
    with pytest.raises(ConfigError, match=r"model folder 'org/missing' not found"):
        check_model_source("org/missing", WHERE)  # not cached: the folder here decides
    assert _Hub.asked == []


def test_the_error_names_the_part_of_the_path_that_is_missing(hub, tmp_path):
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(ConfigError, match=re.escape(f"'{tmp_path.resolve()}/ckpt' has no 'missing'")):
        check_model_source("ckpt/missing", WHERE)


def test_a_name_that_is_no_hub_id_is_refused(hub):
    with pytest.raises(ConfigError, match=r"'my model' is neither a folder .* nor a Hugging Face hub id"):
        check_model_source("my model", WHERE)
    assert _Hub.asked == []


def test_an_unreachable_hub_is_said_at_once(hub, monkeypatch):
    from huggingface_hub import constants

    with socket_closed() as url:
        monkeypatch.setattr(constants, "ENDPOINT", url)
        with pytest.raises(ConfigError, match=r"'org/exists' is not a local folder .* hub could not be reached"):
            check_model_source("org/exists", WHERE)


class socket_closed:  # noqa: N801 -- used as a context manager
    """A URL on a port that was bound and closed: connections are refused."""

    def __enter__(self):
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc):
        return False


def test_corl_train_with_a_missing_relative_model_exits_2_naming_the_option(tmp_path, tiny_data):
    # as a user would: a run config whose model is a relative folder that is not there
    (tmp_path / "ckpt").mkdir()
    config = {
        "agents": [{"name": "a", "model": "ckpt/missing"}, {"name": "b", "model": "ckpt/missing"}],
        "data": {"train": str(tiny_data["train"])},
        "cohort": {"steps": 1, "prompts_per_step": 2, "samples_per_prompt": 2},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    with socket_closed() as url:  # a hub that cannot answer: the check must not need it
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        proc = subprocess.run(
            [sys.executable, "-m", "corl", "train", "run.yaml", "-o", str(tmp_path / "out")],
            cwd=tmp_path,
            env={**env, "HF_ENDPOINT": url},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "agents.0.model" in said and "'ckpt/missing' not found" in said, said
    assert f"'{Path(tmp_path).resolve()}/ckpt' has no 'missing'" in said, said
    # named before the memory plan, which would ask the (unanswering) hub for the folder's
    # config.json through its retries: ~50 s before the one-line error
    assert "memory plan" not in said and "Connection refused" not in said, said
