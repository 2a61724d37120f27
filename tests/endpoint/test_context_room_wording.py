"""The not-checked line of a check whose long prompt has no room in the server's context reads right at the edge: a
context exactly as long as the prompt has no room for it (and the tokens the template and the answer need), never
"(12,000) is shorter than this probe's prompt (12,000)". The server is a scripted /v1/models on loopback."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from golive_run import golive_run

MODEL = "golive-reference"  # reference-cpu's served name
PROMPT = 12_000  # the prefill-stall probe's long prompt (the site profile below)
NEEDLE = int(16384 * 0.9)  # reference-cpu's needle prompt: 90 % of its 16,384-token context


def _serving(context: int) -> type[BaseHTTPRequestHandler]:
    class Models(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            listed = {"object": "list", "data": [{"id": MODEL, "max_model_len": context}]}
            body = json.dumps(listed).encode() if self.path == "/v1/models" else b""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Models


@pytest.mark.parametrize(
    "check, context, said",
    [
        (
            "endpoint.prefill.streams_keep_decoding_during_long_prefill",
            PROMPT,
            "the server's 12,000-token context has no room for this probe's 12,000-token prompt and 256 tokens for "
            "the chat template and the answer: see the max_model_len check",
        ),
        (
            "endpoint.context.needle_retrieved_near_full_context",
            NEEDLE,
            f"the server's {NEEDLE:,}-token context has no room for this probe's {NEEDLE:,}-token prompt and 256 "
            "tokens for the chat template and the answer: see the max_model_len check",
        ),
    ],
    ids=["prefill-stall", "needle"],
)
def test_a_context_as_long_as_the_prompt_has_no_room_for_it(tmp_path, check, context, said):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _serving(context))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = tmp_path / "site.yaml"
    site.write_text(f"extends: reference-cpu\nload:\n  prefill_stall: {{prompt_tokens: {PROMPT}}}\n")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: {site}\nstations:\n  - {{name: s, endpoint: 'http://127.0.0.1:{server.server_address[1]}/v1'}}\n"
    )
    try:
        run = golive_run(inventory, tmp_path / "out", "-m", "endpoint", "-k", check, "-p", "no:cacheprovider")
    finally:
        server.shutdown()
        server.server_close()
    assert run.checks and {c["outcome"] for c in run.checks} == {"not_checked"}, run.output[-3000:]
    for result in run.checks:
        assert said in result["message"], result["message"]
