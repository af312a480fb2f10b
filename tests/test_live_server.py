"""The end-to-end tests' model server (tests/live_server.py): loopback only, bounded, DeepSeek's SSE shape, and a
prefix cache that counts whole blocks of the longest prefix shared with an earlier prompt of the same model."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from live_server import BLOCK_TOKENS, BYTES_PER_TOKEN, Answer, ModelServer, Script, prompt_bytes

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never through a proxy the environment names


def post(server: ModelServer, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{server.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with DIRECT.open(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def body(*texts: str, model: str = "deepseek-v4-flash") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text} for text in texts], "stream": True}


def events(stream: bytes) -> list[Any]:
    return [line.removeprefix(b"data: ") for line in stream.split(b"\n\n") if line]


def test_it_listens_on_loopback_and_streams_deepseeks_shape() -> None:
    with ModelServer(Script(loop=[Answer("hi", reasoning="think", tool_calls=(("bash", {"command": "ls"}),))])
                     ) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, stream = post(server, body("hello"))
    assert status == 200
    *chunks, done = events(stream)
    assert done == b"[DONE]"
    deltas = [json.loads(chunk)["choices"][0]["delta"] for chunk in chunks]
    assert deltas[0]["reasoning_content"] == "think" and deltas[1]["content"] == "hi"
    assert deltas[2]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    final = json.loads(chunks[-1])
    assert final["choices"][0]["finish_reason"] == "tool_calls"
    assert set(final["usage"]) >= {"prompt_tokens", "completion_tokens", "prompt_cache_hit_tokens",
                                   "prompt_cache_miss_tokens"}


def test_the_cache_hit_is_the_shared_prefix_of_the_same_model_in_whole_blocks() -> None:
    first, longer = body("a" * 1000), body("a" * 1000, "b" * 500)
    with ModelServer(Script()) as server:
        post(server, first)
        post(server, longer)
        post(server, body("a" * 1000, model="deepseek-v4-pro"))
    cold, warm, other_model = (received.usage for received in server.received)
    assert cold is not None and warm is not None and other_model is not None
    shared = len(prompt_bytes(first)) - len(b"]]")   # the first prompt up to the end of its last message
    assert warm["prompt_cache_hit_tokens"] == shared // BYTES_PER_TOKEN // BLOCK_TOKENS * BLOCK_TOKENS
    assert warm["prompt_cache_hit_tokens"] + warm["prompt_cache_miss_tokens"] == warm["prompt_tokens"]
    assert cold["prompt_cache_hit_tokens"] == other_model["prompt_cache_hit_tokens"] == 0


def test_a_refused_request_seeds_nothing_and_a_torn_one_does() -> None:
    script = Script(loop=[Answer(fail="500"), Answer(fail="overflow"), Answer("partial", fail="torn")])
    with ModelServer(script) as server:
        assert post(server, body("x" * 800))[0] == 500
        assert post(server, body("x" * 800))[0] == 400
        status, stream = post(server, body("x" * 800))
        post(server, body("x" * 800))
    assert status == 200 and b"[DONE]" not in stream
    refused, overflowed, torn, after = server.received
    assert refused.usage is None and overflowed.usage is None
    assert torn.usage is not None and torn.usage["prompt_cache_hit_tokens"] == 0 and not torn.delivered
    assert after.usage is not None and after.usage["prompt_cache_hit_tokens"] > 0


def test_calls_are_told_apart() -> None:
    title = {**body("name this"), "thinking": {"type": "disabled"}, "max_tokens": 64}
    with ModelServer(Script()) as server:
        post(server, body("loop"))
        post(server, body("summarize"), {"x-deepseek-harness-compact": "1"})
        post(server, title)
    assert [received.kind for received in server.received] == ["loop", "compaction", "title"]


def test_it_is_bounded_in_requests_and_in_time() -> None:
    with ModelServer(Script(), max_requests=2) as server:
        statuses = [post(server, body("q"))[0] for _ in range(3)]
    assert statuses == [200, 200, 503]
    with ModelServer(Script(), lifetime=0.3) as server:
        time.sleep(1.0)
        with pytest.raises(urllib.error.URLError):
            post(server, body("late"))
