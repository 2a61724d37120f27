"""A streaming chat server whose token send times are known: the truth golive's load generator is measured against.

Plain asyncio (no web framework in the way): HTTP/1.1 keep-alive, chunked transfer, OpenAI chat SSE with usage, the
way vLLM streams. Each generated token is one SSE event; the server reads `time.perf_counter()` (CLOCK_MONOTONIC,
shared across processes on Linux) just before the write that puts it on the socket, and keeps those times per request,
keyed by the salt golive puts first in every prompt. `GET /truth` hands them over (and forgets them).

`--role-with-first-token` writes the role chunk in the same write as the first token, as vLLM's serving_chat does (it
yields the role chunk on the engine's first output); by default it goes with the response headers, as some servers
send it, which `vllm bench serve` then times as the first token (docs/metrics.md).

Two scripts:
- `paced`: each stream on its own timer, first token after `ttft_ms`, then gaps cycling through `itl_ms` (a fixed,
  uneven pattern, so a generator that smooths or rounds is caught).
- `stepped`: a batch engine: every step, every open stream gets `tokens_per_event` tokens in one event, and all of a
  step's events are written together (the kernel coalesces them the way a busy server's are). `step_ms` 0 means as
  fast as the loop turns.

- `station`: a serving station whose truth is known and can be made worse (issue 42): an engine that runs at most
  `--max-num-seqs` sequences (the rest wait in its queue), a TTFT and a decode step by the number running
  (`--ttft-table`, `--step-table`: `users:ms` pairs, log-log between them; the recipe's tables are in
  bench/station_model.py), every time × `--slower`, TTFT alone × `--ttft-slower`, `--prefill-stalls-decode` (each
  admitted request's prefill freezes the running streams, as without chunked prefill), and noise like a real
  station's: `--noise-sigma` (the speed's log drifts step to step, an AR(1) over about a second) and
  `--stalls-per-min` multi-second freezes of `--stall-s` (seeded: `--seed`). Its send times are the truth (`/truth`).

Run as a process: `python bench/scripted_stream.py --script paced` prints the port it listens on, then serves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time

ITL_PATTERN_MS = (4.0, 9.0, 2.5, 13.0, 6.0, 3.0, 21.0, 5.0)


class Stream:
    def __init__(self, writer: asyncio.StreamWriter, salt: str, tokens: int):
        self.writer, self.salt, self.left = writer, salt, tokens
        self.before_first = b""  # what goes out with the first event (the role chunk, --role-with-first-token)
        self.done = asyncio.get_running_loop().create_future()


def interpolated(table: dict[int, float], users: int) -> float:
    """Log-log between a table's points (users → ms); flat beyond its ends."""
    points = sorted(table.items())
    if users <= points[0][0]:
        return points[0][1]
    for (u0, v0), (u1, v1) in zip(points, points[1:], strict=False):
        if users <= u1:
            share = math.log(users / u0) / math.log(u1 / u0)
            return math.exp(math.log(v0) + share * math.log(v1 / v0))
    return points[-1][1]


class Station:
    """The `station` script's engine: a queue, at most `max_num_seqs` running, a first token after TTFT (by the
    number running when admitted), then one token a step to every running stream."""

    def __init__(self, args: argparse.Namespace):
        self.ttft = {int(k): float(v) for k, v in (pair.split(":") for pair in args.ttft_table)}
        self.step = {int(k): float(v) for k, v in (pair.split(":") for pair in args.step_table)}
        self.max_num_seqs, self.slower, self.ttft_slower = args.max_num_seqs, args.slower, args.ttft_slower
        self.prefill_stalls = args.prefill_stalls_decode
        self.noise_sigma, self.stalls_per_min, self.stall_s = args.noise_sigma, args.stalls_per_min, args.stall_s
        self.random = random.Random(args.seed)
        self.waiting: list[tuple[Stream, float]] = []
        self.running: list[tuple[Stream, float]] = []  # (stream, when its first token is due)
        self.wake = asyncio.Event()
        self.drift = 0.0
        self.due = time.perf_counter()  # when the next decode step is due
        rate = self.stalls_per_min / 60
        self.next_stall = time.perf_counter() + (self.random.expovariate(rate) if rate else math.inf)

    def add(self, stream: Stream) -> None:
        self.waiting.append((stream, time.perf_counter()))
        self.wake.set()

    async def loop(self, truth: dict[str, list[float]], event: bytes) -> None:
        clock = time.perf_counter
        while True:
            if not self.waiting and not self.running:
                self.wake.clear()
                await self.wake.wait()
            now = clock()
            frozen = 0.0
            while self.waiting and len(self.running) < self.max_num_seqs:
                stream, _ = self.waiting.pop(0)
                ttft = interpolated(self.ttft, len(self.running) + 1) * self.slower * self.ttft_slower / 1000
                self.running.append((stream, now + ttft))
                if self.prefill_stalls:
                    frozen += ttft  # the prefill takes the engine's steps: the running streams wait
            if frozen:
                await asyncio.sleep(frozen)
            if self.stalls_per_min and now >= self.next_stall:
                await asyncio.sleep(self.stall_s)  # a freeze: no stream gets a token
                self.next_stall = clock() + self.random.expovariate(self.stalls_per_min / 60)
            now = clock()
            for stream, due in self.running:
                if due <= now:
                    truth[stream.salt].append(clock())
                    stream.writer.write(stream.before_first + event)
                    stream.before_first = b""
                    stream.left -= 1
                    if stream.left <= 0:
                        stream.done.set_result(None)
            self.running = [(s, due) for s, due in self.running if s.left > 0]
            self.drift = 0.99 * self.drift + math.sqrt(1 - 0.99**2) * self.random.gauss(0, self.noise_sigma)
            step = interpolated(self.step, max(1, len(self.running))) * self.slower * math.exp(self.drift) / 1000
            # steps on a schedule, not a sleep after each (a late wake-up on a busy machine is caught up, not added)
            self.due = max(self.due + step, clock() - 10 * step)
            first = min([due for _, due in self.running if due > now], default=self.due)
            await asyncio.sleep(max(0.0, min(self.due, first) - clock()) if self.running else 0.0)
            if not self.running:
                self.due = clock()


class ScriptedServer:
    def __init__(
        self,
        script: str,
        ttft_ms: float,
        itl_ms: tuple[float, ...],
        step_ms: float,
        tokens_per_event: int,
        role_with_first_token: bool = False,
    ):
        self.script, self.ttft_ms, self.itl_ms = script, ttft_ms, itl_ms
        self.role_with_first_token = role_with_first_token
        self.step_ms, self.tokens_per_event = step_ms, tokens_per_event
        self.truth: dict[str, list[float]] = {}
        self.requests = 0
        self.open: list[Stream] = []
        self.wake = asyncio.Event()
        self.token_event = _chunk({"content": "tok "})
        self.station: Station | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another on this connection
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    (
                        int(v)
                        for k, _, v in (ln.partition(":") for ln in lines)
                        if k.strip().lower() == "content-length"
                    ),
                    0,
                )
                body = json.loads(await reader.readexactly(length)) if length else {}
                method, path = lines[0].split(" ")[:2]
                if path.endswith("/chat/completions"):
                    await self.chat(writer, body)
                elif path == "/tokenize":  # ~10 tokens a sentence, like golive's fallback
                    _json(writer, {"count": 10 * body.get("prompt", "").count(".")})
                elif path == "/v1/models":
                    _json(
                        writer,
                        {
                            "object": "list",
                            "data": [{"id": "scripted", "object": "model", "root": "scripted", "max_model_len": 4096}],
                        },
                    )
                elif path == "/truth":
                    truth, self.truth = self.truth, {}
                    _json(writer, truth)
                else:
                    _json(writer, {"error": "not found"}, status="404 Not Found")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def chat(self, writer: asyncio.StreamWriter, body: dict) -> None:
        content = body["messages"][0]["content"]
        if isinstance(content, list):  # vLLM's and AIPerf's clients send content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        self.requests += 1
        # golive's prompts start with its salt; other clients' requests are kept by their order
        salt = content[1:13] if content.startswith("[") else f"request-{self.requests}"
        tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        role = _chunk({"role": "assistant", "content": ""})
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            + (b"" if self.role_with_first_token else role)
        )
        sent = self.truth.setdefault(salt, [])
        if self.script == "paced":
            start = time.perf_counter()
            due = start + self.ttft_ms / 1000
            for i in range(tokens):
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                sent.append(time.perf_counter())
                first = i == 0 and self.role_with_first_token
                writer.write(role + self.token_event if first else self.token_event)
                due += self.itl_ms[i % len(self.itl_ms)] / 1000
        else:
            stream = Stream(writer, salt, tokens)
            stream.before_first = role if self.role_with_first_token else b""
            if self.station is not None:
                self.station.add(stream)
            else:
                self.open.append(stream)
                self.wake.set()
            await stream.done
        writer.write(_chunk({}, finish="length") + _usage(tokens) + _frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    async def stepper(self) -> None:
        """The `stepped` script's engine loop: one step = one event to every open stream, written back to back."""
        per_event = self.tokens_per_event
        event = _chunk({"content": "tok " * per_event})
        clock = time.perf_counter
        due = clock()
        while True:
            if not self.open:
                self.wake.clear()
                await self.wake.wait()
                due = clock()
            for stream in self.open:
                self.truth[stream.salt].append(clock())  # each event's own send time: a burst takes a while
                stream.writer.write(stream.before_first + event)
                stream.before_first = b""
                stream.left -= per_event
                if stream.left <= 0:
                    stream.done.set_result(None)
            self.open = [s for s in self.open if s.left > 0]
            due += self.step_ms / 1000  # steps on a fixed schedule: the burst's own time is not added to the step
            await asyncio.sleep(max(0.0, due - clock()))


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    event = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return _frame(b"data: " + json.dumps(event).encode() + b"\n\n")


def _usage(tokens: int) -> bytes:
    event = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "scripted",
        "choices": [],
        "usage": {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens},
    }
    return _frame(b"data: " + json.dumps(event).encode() + b"\n\n")


def _json(writer: asyncio.StreamWriter, value, status: str = "200 OK") -> None:
    data = json.dumps(value).encode()
    writer.write(
        b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (status.encode(), len(data), data)
    )


async def serve(args: argparse.Namespace) -> None:
    server = ScriptedServer(
        args.script, args.ttft_ms, tuple(args.itl_ms), args.step_ms, args.tokens_per_event, args.role_with_first_token
    )
    listener = await asyncio.start_server(server.handle, "127.0.0.1", args.port, backlog=1024)
    print(listener.sockets[0].getsockname()[1], flush=True)
    if args.script == "stepped":
        asyncio.get_running_loop().create_task(server.stepper())
    elif args.script == "station":
        server.station = Station(args)
        asyncio.get_running_loop().create_task(server.station.loop(server.truth, server.token_event))
    await listener.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", choices=("paced", "stepped", "station"), default="paced")
    parser.add_argument("--ttft-table", nargs="+", default=["1:7.9", "2:12.2", "4:16", "8:26.8"], help="users:ms")
    parser.add_argument("--step-table", nargs="+", default=["1:1.72", "2:1.85", "4:2.02", "8:2.53"], help="users:ms")
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--slower", type=float, default=1.0, help="every time × this")
    parser.add_argument("--ttft-slower", type=float, default=1.0, help="TTFT alone × this")
    parser.add_argument("--prefill-stalls-decode", action="store_true")
    parser.add_argument("--noise-sigma", type=float, default=0.0, help="the speed's log, step to step (AR(1))")
    parser.add_argument("--stalls-per-min", type=float, default=0.0)
    parser.add_argument("--stall-s", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=30.0)
    parser.add_argument("--itl-ms", type=float, nargs="+", default=list(ITL_PATTERN_MS))
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--role-with-first-token", action="store_true", help="as vLLM: the role chunk with token 1")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
