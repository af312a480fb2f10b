"""A DeepSeek-shaped model server on 127.0.0.1 for the end-to-end tests on the published dsh CLI.

It streams scripted answers in DeepSeek's chat-completions SSE shape, records every request body byte for byte,
and answers usage from a simulated prefix cache: a request's cache hit is the longest common prefix of its
prompt with any earlier prompt of the same model, counted in whole blocks, as DeepSeek's context cache does
(its guide: hits are whole prefix units of a repeated prompt). Tokens are counted as bytes / BYTES_PER_TOKEN:
the server, not a tokenizer, is the authority the log is compared with.

Bounded: at most `max_requests` requests and `lifetime` seconds, then it stops by itself; a test stops it at
the end in any case (a context manager).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BYTES_PER_TOKEN = 4
BLOCK_TOKENS = 16            # the cache's unit: a hit is a whole number of blocks
COMPACT_HEADER = "x-deepseek-harness-compact"


@dataclass(frozen=True, slots=True)
class Answer:
    """One scripted reply: a streamed message, or a failure of the kind named by `fail`."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()   # (tool name, arguments)
    fail: str | None = None   # "500" | "503" | "overflow" | "torn"


@dataclass(frozen=True, slots=True)
class Received:
    """A request as the server received it, and the usage it computed (None: it answered an error before reading
    the prompt, which then seeds no cache). A torn stream computed usage but never delivered it."""

    kind: str                 # "loop" | "compaction" | "title"
    body: bytes
    usage: dict[str, int] | None
    delivered: bool = True


def prompt_bytes(body: dict[str, Any]) -> bytes:
    """What the simulated cache keys on: tools, then messages, in the order DeepSeek renders its prompt."""
    return json.dumps([body.get("tools"), body.get("messages")], ensure_ascii=False,
                      separators=(",", ":")).encode()


def tokens(data: bytes) -> int:
    return -(-len(data) // BYTES_PER_TOKEN)


def common_prefix(left: bytes, right: bytes) -> int:
    length = min(len(left), len(right))
    index = 0
    while index < length and left[index] == right[index]:
        index += 1
    return index


@dataclass
class Script:
    """The answers of one scenario, consumed in order per kind; an exhausted loop script answers `done`."""

    loop: list[Answer] = field(default_factory=list)
    compaction: list[Answer] = field(default_factory=list)
    done: str = "Done."
    title: str = "Scripted session title"
    summary: str = "Summary of the conversation so far: the user asked for scripted answers."

    def next(self, kind: str) -> Answer:
        if kind == "title":
            return Answer(self.title)
        queue = self.loop if kind == "loop" else self.compaction
        if queue:
            return queue.pop(0)
        return Answer(self.done if kind == "loop" else self.summary)


class ModelServer:
    def __init__(self, script: Script, *, max_requests: int = 60, lifetime: float = 240.0) -> None:
        self.script = script
        self.received: list[Received] = []
        self.max_requests = max_requests
        self._prompts: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def usage_for(self, body: dict[str, Any], completion: int) -> dict[str, int]:
        """DeepSeek's usage fields for a prompt, its hit the longest cached prefix in whole blocks."""
        prompt = prompt_bytes(body)
        with self._lock:
            earlier = self._prompts.setdefault(str(body.get("model")), [])
            shared = max((common_prefix(prompt, old) for old in earlier), default=0)
            earlier.append(prompt)
        total = tokens(prompt)
        hit = min(total, shared // BYTES_PER_TOKEN // BLOCK_TOKENS * BLOCK_TOKENS)
        return {"prompt_tokens": total, "completion_tokens": completion, "total_tokens": total + completion,
                "prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": total - hit}

    def record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)


def kind_of(body: dict[str, Any], headers: Any) -> str:
    if headers.get(COMPACT_HEADER) == "1":
        return "compaction"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "disabled" and int(body.get("max_tokens") or 0) <= 64:
        return "title"
    return "loop"


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    payload: dict[str, Any] = {"id": "scripted", "object": "chat.completion.chunk", "model": "scripted",
                               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        payload["usage"] = usage
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def stream(answer: Answer, usage: dict[str, int]) -> Iterator[bytes]:
    if answer.reasoning:
        yield _chunk({"role": "assistant", "reasoning_content": answer.reasoning})
    if answer.text:
        yield _chunk({"role": "assistant", "content": answer.text})
    for index, (name, arguments) in enumerate(answer.tool_calls):
        yield _chunk({"tool_calls": [{"index": index, "id": f"call_{index}_{name}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(arguments)}}]})
    yield _chunk({}, "tool_calls" if answer.tool_calls else "stop", usage)
    yield b"data: [DONE]\n\n"


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:   # quiet: the test reads `received`
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.endswith("/chat/completions"):
                self._error(404, {"error": {"message": f"no route {self.path}"}})
                return
            parsed = json.loads(body)
            kind = kind_of(parsed, self.headers)
            answer = server.script.next(kind)
            if answer.fail in ("500", "503") or len(server.received) >= server.max_requests:
                server.record(Received(kind, body, None))
                self._error(int(answer.fail or 503), {"error": {"message": "scripted server error",
                                                               "type": "server_error"}})
                return
            if answer.fail == "overflow":
                server.record(Received(kind, body, None))
                self._error(400, {"error": {"message": "This model's maximum context length is 131072 tokens.",
                                            "type": "invalid_request_error", "code": "context_length_exceeded"}})
                return
            text = answer.text + answer.reasoning + json.dumps([list(call) for call in answer.tool_calls])
            usage = server.usage_for(parsed, tokens(text.encode()))
            server.record(Received(kind, body, usage, delivered=answer.fail != "torn"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            chunks = list(stream(answer, usage))
            if answer.fail == "torn":   # the first part of the answer, then the connection drops
                chunks = chunks[:1]
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
            self.close_connection = True

        def _error(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True

    return Handler
