"""docs/metrics.md on scripted timelines: bytes arrive at known times, the load generator must read exactly them.

The timelines are served by a loopback HTTP/1.1 server (chunked, as vLLM streams) that moves the test's clock before
each write and lets the client read it before the next.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from golive.endpoint.load_batch import lanes, run_level, summarize
from golive.endpoint.load_request import RequestTiming, SseParser, Workload, one_request


class Clock:
    """The test decides what time it is: the scripted stream moves it before each chunk arrives."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def event(delta: dict | None = None, usage: dict | None = None) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": delta}] if delta is not None else [], "usage": usage}
    return f"data: {json.dumps(chunk)}\n\n".encode()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return await reader.readexactly(length)


async def serving(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], work: Callable[[str], Awaitable]
):
    """Run `work(url)` against a loopback server answering every request on a connection with `handle`."""

    async def connection(reader, writer):
        try:
            while not reader.at_eof():
                await handle(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    async with server:
        return await work(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions")


def chunked(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(b"%x\r\n%s\r\n" % (len(data), data))


def run(script: list[tuple[float, bytes]], status: int = 200, output_tokens: int = 5) -> RequestTiming:
    """Serve `script` — (seconds after send, bytes) — as the response body; return the timeline the client read."""
    clock = Clock()
    sent = clock.now

    async def handle(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 %d X\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" % status)
        for at, chunk in script:
            clock.now = sent + at
            chunked(writer, chunk)
            await writer.drain()
            await asyncio.sleep(0.005)  # the client reads this chunk before the clock moves again
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def work(url):
        async with lanes(url, 1, 10, clock=clock)[0] as lane:
            return await one_request(lane, Workload(model="m", prompt_tokens=40, output_tokens=output_tokens), {})

    return asyncio.run(serving(handle, work))


THINKING_ANSWER = [
    (0.05, event({"role": "assistant", "content": ""})),  # the role chunk carries no token
    (0.10, event({"reasoning": "Let"})),
    (0.12, event({"reasoning": " me"})),
    (0.15, event({"reasoning_content": " think"})),  # older vLLM's field name counts too
    (0.20, event({"content": "Four"})),
    (0.30, event({"content": "."})),
    (0.31, event(usage={"prompt_tokens": 42, "completion_tokens": 5, "total_tokens": 47})),
    (0.32, b"data: [DONE]\n\n"),
]


def test_timeline_follows_the_definitions():
    t = run(THINKING_ANSWER)
    assert t.error is None
    assert t.ttft == pytest.approx(0.10)  # first delta of any kind: reasoning counts
    assert t.first_content == pytest.approx(0.20)  # TTFO: first content delta
    assert t.itls == pytest.approx([0.02, 0.03, 0.05, 0.10])
    assert t.tpot == pytest.approx((0.32 - 0.10) / 4)  # E2E − TTFT over the server's tokens after the first
    assert t.end == pytest.approx(0.32)  # E2E: the last byte
    assert (t.prompt_tokens, t.completion_tokens, t.client_tokens) == (42, 5, 5)


def test_an_event_split_over_chunks_is_timed_when_its_last_byte_arrives():
    whole = event({"reasoning": "a"})
    script = [(0.10, whole[:7]), (0.25, whole[7:]), *THINKING_ANSWER[2:]]
    t = run(script)
    assert t.ttft == pytest.approx(0.25)
    parser = SseParser()
    assert parser.feed(b": keep-alive\r\n\r\ndata: 1\r\n\r\ndata: 2\n\ndata: ", 1.0) == [("1", 1.0), ("2", 1.0)]
    assert parser.feed(b"[DONE]\n\n", 2.0) == [("[DONE]", 2.0)]


@pytest.mark.parametrize(
    "script,status,fragment",
    [
        (THINKING_ANSWER[:-1], 200, "without [DONE]"),
        (THINKING_ANSWER, 200, "usage says 5 completion tokens, asked for 6"),
        ([(0.1, b'{"error": "boom"}')], 500, "HTTP 500"),
    ],
    ids=["stream-cut", "answer-short", "http-error"],
)
def test_failed_requests_are_failures(script, status, fragment):
    t = run(script, status=status, output_tokens=6 if "short" in fragment or "usage" in fragment else 5)
    assert t.error is not None and fragment in t.error


def test_a_dropped_connection_is_a_failure():
    async def drop(reader, writer):
        await read_request(reader)
        writer.transport.abort()

    async def work(url):
        async with lanes(url, 1, 10)[0] as lane:
            return await one_request(lane, Workload(model="m", prompt_tokens=40, output_tokens=5), {})

    assert "closed before an HTTP response" in asyncio.run(serving(drop, work)).error


def test_a_stream_that_falls_silent_fails_on_its_timeout():
    async def stall(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        chunked(writer, THINKING_ANSWER[1][1])
        await writer.drain()
        await asyncio.sleep(5)

    async def work(url):
        async with lanes(url, 1, 0.3)[0] as lane:
            return await one_request(lane, Workload(model="m", prompt_tokens=40, output_tokens=5), {})

    error = asyncio.run(serving(stall, work)).error
    assert "the stream stalled; timeout 0.3 s" in error, error


def test_level_summary_aggregates_server_tokens_over_wall_time():
    def timing(ttft: float, last: float, end: float, tokens: int, error=None) -> RequestTiming:
        step = (last - ttft) / (tokens - 1)
        return RequestTiming(
            sent=0,
            token_times=[ttft + i * step for i in range(tokens)],
            end=end,
            completion_tokens=tokens,
            prompt_tokens=40,
            error=error,
        )

    timings = [timing(0.1, 1.1, 1.2, 101), timing(0.3, 2.3, 2.4, 101), timing(0.2, 0.2, 0.3, 2, error="HTTP 500")]
    level = summarize(2, timings, started=10.0, ended=12.5)
    assert (level.requests, level.failures, level.output_tokens) == (3, 1, 202)  # failed requests' tokens not counted
    assert level.aggregate_tok_s == pytest.approx(202 / 2.5)
    assert level.per_user_tok_s_p50 == pytest.approx((100 / 1.1 + 100 / 2.1) / 2)  # median of 1/TPOT
    assert level.ttft_p50_s == pytest.approx(0.2) and level.e2e_p50_s == pytest.approx(1.8)
    assert level.itl_p50_s == pytest.approx(0.015)  # pooled gaps: 100 of 0.01 s and 100 of 0.02 s
    assert level.errors == ["HTTP 500"] and level.client_usage_mismatches == 0


# The recipes' published measurements, as RECIPES.md gives them ([000] prose, [002] AIPerf table), as data: the
# shipped profiles' load numbers are derived from these, and the test derives them again.
FLASH_MEASURED = {  # [000]: users -> (aggregate tok/s, per-user tok/s median, TTFT p50 s); 1 user: 145.9 tok/s
    1: (145.9, 145.9, 0.061),
    32: (1464, 55.6, 0.985),
    256: (2517, 29, None),
}
TWO_STATION_TABLE = """
| concurrency | throughput tok/s | mean request latency s | mean TTFT ms | mean ITL ms | per-user tok/s |
| --- | --- | --- | --- | --- | --- |
| 1 | 107.4 | 49.84 | 479.75 | 8.78 | 115.3 |
| 8 | 386.0 | 114.17 | 433.79 | 19.01 | 53.0 |
| 16 | 607.8 | 136.46 | 482.90 | 23.77 | 42.4 |
| 32 | 385.0 | 453.54 | 899.36 | 77.90 | 13.0 |
"""


def _table(markdown: str) -> dict[int, dict[str, float]]:
    lines = [[cell.strip() for cell in line.strip("|").split("|")] for line in markdown.strip().splitlines()]
    header, rows = lines[0], lines[2:]
    return {int(row[0]): dict(zip(header[1:], map(float, row[1:]), strict=True)) for row in rows}


def test_shipped_profiles_carry_the_recipes_load_numbers():
    """Each shipped profile's sweep and floors follow from its recipe's measurements: levels = the measured levels,
    single-user floors = the 1-user row, gate floors = the gate level's row, peak = the best throughput measured."""
    from golive.site.loader import load_profile
    from golive_testbed.reference.launcher import healthy_flags

    flash = load_profile("glm-5.3-flash-gb300").profile.load
    assert flash is not None and flash.gate_concurrency is not None
    assert flash.concurrency == sorted(FLASH_MEASURED) and flash.gate_concurrency in FLASH_MEASURED
    gate = FLASH_MEASURED[flash.gate_concurrency]
    assert (flash.floors.single_user_decode_tok_s, flash.floors.single_user_ttft_p50_s) == FLASH_MEASURED[1][1:]
    assert (flash.floors.aggregate_tok_s, flash.floors.per_user_tok_s_p50, flash.floors.ttft_p50_s) == gate
    assert flash.floors.peak_tok_s == max(aggregate for aggregate, _, _ in FLASH_MEASURED.values())
    assert flash.max_concurrency == max(FLASH_MEASURED)  # the peak level is reachable: never capped below it

    two = load_profile("glm-5.3-2x-station-tp2").profile.load
    assert two is not None and two.gate_concurrency is not None
    table = _table(TWO_STATION_TABLE)
    assert two.concurrency == sorted(table) and two.gate_concurrency in table
    one, at_gate = table[1], table[two.gate_concurrency]
    assert two.floors.single_user_decode_tok_s == one["per-user tok/s"]
    assert two.floors.single_user_ttft_p50_s == round(one["mean TTFT ms"] / 1000, 3)
    assert two.floors.aggregate_tok_s == at_gate["throughput tok/s"]
    assert two.floors.per_user_tok_s_p50 == at_gate["per-user tok/s"]
    assert two.floors.ttft_p50_s == round(at_gate["mean TTFT ms"] / 1000, 3)
    assert two.floors.peak_tok_s == max(row["throughput tok/s"] for row in table.values())
    assert two.max_concurrency == max(table)

    # the CPU profile sweeps no deeper than the reference station batches (its --max-num-seqs)
    cpu = load_profile("reference-cpu").profile.load
    assert cpu is not None
    assert cpu.max_concurrency == int(healthy_flags(0)["--max-num-seqs"] or 0) >= max(cpu.concurrency)


@pytest.mark.parametrize(
    "load,fragment",
    [
        ("concurrency: [1, 512]", "must lie in 1..max_concurrency (256)"),
        (
            "concurrency: [1, 32]\n  gate_concurrency: 1\n  max_requests: 10",
            "the sweep needs 173 requests, more than max_requests (10)",
        ),  # max(3, 12) + 1 + 32 × (3 + 1) + 32 priming
        ("gate_concurrency: 3", "gate_concurrency 3 is not one of the levels [1, 2, 4, 8]"),
        ("tolerance: 1.5", "'load.tolerance'"),
    ],
    ids=["over-max-concurrency", "over-max-requests", "gate-not-a-level", "tolerance"],
)
def test_load_outside_its_bounds_is_one_line_with_its_place(tmp_path, load, fragment):
    from golive.site.loader import ConfigError, load_profile

    site = tmp_path / "site.yaml"
    site.write_text(f"extends: reference-cpu\nload:\n  max_concurrency: 256\n  {load}\n")
    with pytest.raises(ConfigError) as info:
        load_profile(site)
    message = str(info.value)
    assert "\n" not in message and fragment in message and f"{site}:" in message, message


def test_run_level_keeps_each_lane_to_one_request_at_a_time():
    """C lanes (one keep-alive connection each) carry at most C requests in flight, one per lane."""
    in_flight, peak, connections = 0, 0, set()
    body = (
        b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
        b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}\n\ndata: [DONE]\n\n'
    )

    async def answer(reader, writer):
        nonlocal in_flight, peak
        await read_request(reader)
        connections.add(writer.get_extra_info("peername"))
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()

    async def work(url):
        clients = lanes(url, 3, 10)
        timings, _, _ = await run_level(
            clients, Workload(model="m", prompt_tokens=5, output_tokens=1), {}, 3, 7, deadline=float("inf"), sentences=1
        )
        for lane in clients:
            await lane.aclose()
        return timings

    timings = asyncio.run(serving(answer, work))
    assert len(timings) == 7 and all(t.error is None for t in timings), [t.error for t in timings]
    assert peak == 3 and len({t.salt for t in timings}) == 7
    assert len(connections) == 3  # keep-alive: each lane reused its one connection


@pytest.mark.parametrize("closing", ["says-close", "closes-when-idle"])
def test_a_lane_reconnects_when_the_server_ends_its_connection(closing):
    """A server that answers `Connection: close`, or drops an idle keep-alive connection (uvicorn does after 5 s):
    the lane's next request goes out on a new connection instead of failing."""
    body = (
        b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
        b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}\n\ndata: [DONE]\n\n'
    )
    connections = 0

    async def answer(reader, writer):
        nonlocal connections
        await read_request(reader)
        connections += 1
        close = b"connection: close\r\n" if closing == "says-close" else b""
        writer.write(b"HTTP/1.1 200 OK\r\n%scontent-length: %d\r\n\r\n%s" % (close, len(body), body))
        await writer.drain()
        writer.close()  # either way the server is done with this connection

    async def work(url):
        workload = Workload(model="m", prompt_tokens=5, output_tokens=1)
        async with lanes(url, 1, 10)[0] as lane:
            first = await one_request(lane, workload, {})
            if closing == "closes-when-idle":
                await asyncio.sleep(0.05)  # idle: the close reaches the client
            return first, await one_request(lane, workload, {})  # says-close: straight after, no loop turn

    first, second = asyncio.run(serving(answer, work))
    assert first.error is None and second.error is None, (first.error, second.error)
    assert connections == 2


def test_an_answer_that_arrives_in_one_read_has_no_tpot():
    """A lagging server merged every token into one event that came with the end: no decode time to divide."""
    whole = b"".join(chunk for _, chunk in THINKING_ANSWER[1:])
    t = run([(0.2, whole)])
    assert t.error is None and t.ttft == pytest.approx(0.2) and t.end == pytest.approx(0.2)
    assert t.tpot is None
