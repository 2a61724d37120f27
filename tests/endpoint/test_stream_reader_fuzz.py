"""golive's own stream reader, fuzzed (hypothesis): whatever bytes a server streams as a chat answer (garbled SSE, an
event cut in half, no [DONE], JSON that is not a chat chunk, wrong types, huge lines, invalid UTF-8),
`chat(stream=True)` gives a ChatResult or ONE one-line EndpointError naming the URL; never another exception.

The bytes go over a real loopback HTTP server (the client's whole path: openai's SSE decoder, then golive's
assembly); the assembly alone (golive.endpoint.stream) takes arbitrary JSON values, many more of them.
Bounded and derandomized like tests/unit/test_fuzz.py; GOLIVE_FUZZ_EXAMPLES=N (CI's fuzz step) runs each property
N times.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from golive.endpoint.client import ChatResult, EndpointClient
from golive.endpoint.errors import EndpointError
from golive.endpoint.stream import BrokenEvent, StreamedAnswer
from golive.endpoint.target import EndpointTarget

MODEL = "fuzz-model"
DEPTH = int(os.environ.get("GOLIVE_FUZZ_EXAMPLES") or 0)  # CI's fuzz step: 10000 examples a property
pytestmark = pytest.mark.fuzz  # CI's fuzz step runs these again at depth: `-m fuzz`


def fuzz(examples: int) -> settings:
    """A property's bound in the default loop, or the depth CI's fuzz step asks for."""
    return settings(
        max_examples=DEPTH or examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "choices",
                    "delta",
                    "content",
                    "reasoning",
                    "reasoning_content",
                    "tool_calls",
                    "index",
                    "function",
                    "name",
                    "arguments",
                    "finish_reason",
                    "usage",
                    "prompt_tokens",
                    "completion_tokens",
                    "total_tokens",
                    "error",
                    "id",
                    "message",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


def _chunk(delta: dict, finish=None) -> dict:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


GOOD = [
    _chunk({"role": "assistant", "content": "Hel"}),
    _chunk({"content": "lo"}, "stop"),
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    },
]
# an event's data: a real chunk, any JSON value, or a line of anything (bytes: invalid UTF-8 too)
EVENT_DATA = st.one_of(
    st.sampled_from([json.dumps(c).encode() for c in GOOD]),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=60),
)
SSE = st.builds(
    lambda events, done, cut, sep: (
        b"".join(b"data: " + e + sep for e in events) + (b"data: [DONE]" + sep if done else b"")
    )[:cut],
    st.lists(EVENT_DATA, max_size=6),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 400)),
    st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n", b"\r"]),
)
BODY = st.one_of(SSE, st.binary(max_size=300))


class _ReplayServer(ThreadingHTTPServer):
    body: bytes = b""  # what _Replay answers every POST with


class _Replay(BaseHTTPRequestHandler):
    server: _ReplayServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        # then the connection closes: the stream ends where the bytes end
        self.wfile.write(cast(_ReplayServer, self.server).body)
        self.close_connection = True


@pytest.fixture(scope="module")
def replay():
    server = _ReplayServer(("127.0.0.1", 0), _Replay)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    client = EndpointClient(
        EndpointTarget(
            url,
            api_key="sk-fuzz-secret",
            request_timeout_s=10,
            connect_timeout_s=2,
            light_timeout_s=2,
            stream_stall_timeout_s=5,
        )
    )

    def ask(body: bytes):
        server.body = body
        return client.chat(MODEL, [{"role": "user", "content": "Hi"}], stream=True)

    yield url, ask
    client.close()
    server.shutdown()
    server.server_close()


def _judge(url: str, ask, body: bytes) -> None:
    try:
        result = ask(body)
    except EndpointError as exc:
        text = str(exc)
        assert url in text and "\n" not in text and "Do: " in text and "sk-fuzz-secret" not in text, text
        assert len(text) < 1000, text
        return
    assert isinstance(result, ChatResult)
    assert isinstance(result.content, str) and isinstance(result.reasoning, str)
    assert isinstance(result.finish_reason, str) and isinstance(result.usage, dict)
    assert all(isinstance(n, str) and isinstance(a, str) for n, a in result.tool_calls)


@fuzz(150)
@given(body=BODY)
@example(body=b"data: " + json.dumps(GOOD[0]).encode() + b"\n\ndata: " + b"x" * 1_000_000 + b"\n\n")  # a huge line
@example(body=b"data: \xff\xfe" + json.dumps(GOOD[1]).encode()[2:] + b"\n\n")  # invalid UTF-8
@example(body=b'data: {"error": {"message": "boom\\nsecond line \\u001b[2J"}}\n\n')  # an error event
@example(body=b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in GOOD) + b"data: [DONE]\n\n")
def test_any_streamed_bytes_give_an_answer_or_one_endpoint_error(replay, body):
    url, ask = replay
    _judge(url, ask, body)


def test_a_healthy_stream_still_assembles(replay):
    _, ask = replay
    result = ask(b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in GOOD) + b"data: [DONE]\n\n")
    assert (result.content, result.finish_reason, result.usage["completion_tokens"]) == ("Hello", "stop", 2)


@fuzz(400)
@given(events=st.lists(JSON, max_size=5))
def test_assembly_takes_any_json_events(events):
    answer = StreamedAnswer()
    try:
        for event in events:
            answer.add(event, 0.1)
    except BrokenEvent as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(x, str) for x in answer.content + answer.reasoning)
    assert answer.finish_reason is None or isinstance(answer.finish_reason, str)
    assert isinstance(answer.usage, dict)
    assert all(isinstance(n, str) and isinstance(a, str) for n, a in answer.tool_calls())


def test_vllm_own_chunks_assemble(replay):
    """The stricter reader still takes what vLLM streams: its own protocol models (0.32), serialized as its server
    does (`model_dump_json(exclude_unset=True)`): content, reasoning, a tool call split over two events, usage."""
    protocol = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")
    from vllm.entrypoints.generate.base.protocol import DeltaFunctionCall, DeltaToolCall

    def chunk(finish=None, **delta):
        return protocol.ChatCompletionStreamResponse(
            id="c1",
            model=MODEL,
            choices=[
                protocol.ChatCompletionResponseStreamChoice(
                    index=0, delta=protocol.DeltaMessage(**delta), logprobs=None, finish_reason=finish
                )
            ],
        )

    events = [
        chunk(role="assistant", content=""),
        chunk(reasoning="Paris is in France."),
        chunk(content="Let me look."),
        chunk(
            tool_calls=[
                DeltaToolCall(
                    index=0,
                    id="call_1",
                    type="function",
                    function=DeltaFunctionCall(name="get_weather", arguments='{"city": '),
                )
            ]
        ),
        chunk("tool_calls", tool_calls=[DeltaToolCall(index=0, function=DeltaFunctionCall(arguments='"Paris"}'))]),
        protocol.ChatCompletionStreamResponse(
            id="c1",
            model=MODEL,
            choices=[],
            usage=protocol.UsageInfo(prompt_tokens=12, completion_tokens=9, total_tokens=21),
        ),
    ]
    body = b"".join(f"data: {e.model_dump_json(exclude_unset=True)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
    _, ask = replay
    result = ask(body)
    assert (result.content, result.reasoning, result.finish_reason) == (
        "Let me look.",
        "Paris is in France.",
        "tool_calls",
    )
    assert result.tool_calls == [("get_weather", '{"city": "Paris"}')] and result.usage["completion_tokens"] == 9
