"""What does `kindling proxy` cost a client, next to the bare floor of the same stack?

Three ways to the same fake OpenAI-compatible server (tests/fake_openai.py, in its own process):
- direct: the client talks to the server itself;
- bare forwarder: FastAPI + httpx forwarding /v1/* and nothing else, on uvicorn like the proxy
  (defined below, in its own process): the floor any Python proxy on this stack pays;
- proxy: `python -m kindling proxy` with recording (SQLite) and warm-up on (a template whose
  tools the requests offer, so every conversation's first request is warmed and every later one
  carries the same block), background template builds off (they run in a child process, off the
  request's path, and on two cores would take one from the client, the server and the proxy).

Every client request is part of a conversation of four requests (system prompt, tools, a user
message, then each reply and a new user message), so the proxy recognises, records and re-warms as
it would for an agent. Calls to the three targets alternate, so drift hits all alike.

1. Added latency per non-streaming call (the server answers at once): p50 and p99 of each target's
   latency minus direct's; target: the proxy's added p50 at most 1.25x the bare forwarder's.
2. Time to first chunk of a streaming call, proxy / direct; target at most 1.1x. The server models a
   model's time to first token (X-Fake-Latency, 50 ms by default) and paces its events
   (X-Fake-Chunk-Delay, 5 ms): with no time to first token there is no first chunk to protect.
3. Throughput with 8 concurrent clients, proxy / direct, same modelled server; target at least 0.8x.
   Printed beside it, for information: the same with an instant server, where the two cores of this
   machine are shared by the client, the server and the proxy.

4. With --metrics-overhead, only this: what Prometheus metrics cost the proxy. Two proxies, one with
   metrics on (the default) and one with --no-metrics, on the same fake server; calls alternate
   between them. Printed as on / off: the added latency's p50, the proxy process's CPU time per
   call (the steadiest figure on a shared machine), and the throughput of 8 clients against an
   instant server (CPU-bound), best of alternating rounds; target: within 3% (<= 1.03x, >= 0.97x).

    python bench/proxy.py                      # 150 conversations per target, 5 s of load each
    python bench/proxy.py --quick              # a few seconds
    python bench/proxy.py --metrics-overhead   # metrics on against off
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SYSTEM = {"role": "system", "content": "You are a careful coding agent working in a Python repository. " * 12}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "terminal", "patch")
]
TURNS = 4


# ------------------------------------------------------------------------------------ processes


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, timeout=1)
            return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


@contextlib.contextmanager
def _processes(home: Path, names: tuple[str, ...] = ("fake", "bare", "proxy")) -> Iterator[dict[str, str]]:
    """Start ``names`` (of fake, bare, proxy, and proxy_off: the proxy with --no-metrics); yield
    their base URLs. Their process ids are in ``PIDS`` meanwhile."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "KINDLING_HOME": str(home)}
    ports = {name: _free_port() for name in names}
    upstream = f"http://127.0.0.1:{ports['fake']}/v1"

    def proxy(name: str, *extra: str) -> list[str]:
        return [
            sys.executable, "-m", "kindling", "proxy", "--upstream", upstream, "--port", str(ports[name]),
            "--db", str(home / f"{name}.db"), "--log-level", "warning", *extra,
        ]  # fmt: skip

    commands = {
        "fake": [sys.executable, __file__, "--serve-fake", str(ports["fake"])],
        "bare": [sys.executable, __file__, "--serve-bare", str(ports.get("bare", 0)), upstream],
        # The proxy builds no template in the background: a build is a child process that takes one
        # of this machine's two cores for a while, whenever it happens to run, and what is measured
        # here is the request's path (the warm-up comes from the template the bench gives it).
        "proxy": proxy("proxy", "--build-every", "0"),
        "proxy_off": proxy("proxy_off", "--no-metrics", "--build-every", "0") if "proxy_off" in ports else [],
    }
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name in names:
            procs[name] = subprocess.Popen(commands[name], env=env, stdout=subprocess.DEVNULL)
            PIDS[name] = procs[name].pid
            _wait(f"http://127.0.0.1:{ports[name]}/v1/models", procs[name])
        yield {name: f"http://127.0.0.1:{port}/v1" for name, port in ports.items()}
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(10)


#: The process id of each process ``_processes`` started.
PIDS: dict[str, int] = {}


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metrics_overhead(conversations: int, seconds: float, rounds: int) -> None:
    """Print what metrics cost the proxy: metrics on / off, measured in this run (see item 4)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _template(home)
        with _processes(home, ("fake", "proxy", "proxy_off")) as urls:
            pair = {"direct": urls["fake"], "on": urls["proxy"], "off": urls["proxy_off"]}
            latency(pair, 3, offset=10_000_000)  # warm the connections and the template store
            pids = {"on": PIDS["proxy"], "off": PIDS["proxy_off"]}
            cpu = {name: _cpu_seconds(pid) for name, pid in pids.items()}
            calls = latency(pair, conversations, offset=0)
            served = {name: len(calls[name]) for name in pids}
            rates: dict[str, list[float]] = {"on": [], "off": []}
            for number in range(rounds):
                order = ("on", "off") if number % 2 == 0 else ("off", "on")
                for name in order:
                    offset = 20_000_000 + number * 1_000_000 + (0 if name == "on" else 500_000)
                    done, elapsed = load(pair[name], seconds, 8, offset, {})
                    rates[name].append(done / elapsed)
                    served[name] += done
            used = {name: _cpu_seconds(pid) - cpu[name] for name, pid in pids.items()}
            scraped = httpx.get(urls["proxy"].removesuffix("/v1") + "/metrics", timeout=10).text
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith("kindling_http_requests_total{") and 'route="/v1/chat/completions"' in line
    )
    direct = _percentile(calls["direct"], 0.5)
    added = {name: _percentile(calls[name], 0.5) - direct for name in ("on", "off")}
    per_call = {name: used[name] / served[name] for name in used}
    best = {name: max(values) for name, values in rates.items()}
    print(
        f"metrics overhead: {len(calls['on'])} non-streaming calls per proxy ({conversations} conversations)"
    )
    print(
        f"added latency p50: metrics on {added['on'] * 1000:.3f} ms, off {added['off'] * 1000:.3f} ms; "
        f"on/off {added['on'] / added['off']:.3f}x"
    )
    print(
        f"proxy CPU time per call ({served['on']} and {served['off']} calls): metrics on "
        f"{per_call['on'] * 1000:.3f} ms, off {per_call['off'] * 1000:.3f} ms; "
        f"on/off {per_call['on'] / per_call['off']:.3f}x (target <= 1.03x)"
    )
    print(
        f"throughput, 8 clients, instant server, best of {rounds} alternating rounds: metrics on "
        f"{best['on']:.1f}/s, off {best['off']:.1f}/s; on/off {best['on'] / best['off']:.3f}x (target >= 0.97x)"
    )
    print(f"the metrics-on proxy counted {counted:.0f} chat completions (kindling_http_requests_total)")


def serve_fake(port: int) -> None:
    """The fake OpenAI server on ``port``, recording nothing (a long run must not grow)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_openai import FakeOpenAI, text

    fake = FakeOpenAI()
    fake.record = False
    fake.default = text("I read the file and ran the tests; all 12 pass now. " * 3)
    fake.start(port)
    threading.Event().wait()


def serve_bare(port: int, upstream: str) -> None:
    """The bare forwarder: FastAPI + httpx, forwarding /v1/* with streaming, nothing else."""
    import uvicorn

    state: dict[str, httpx.AsyncClient] = {}
    drop = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state["client"] = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=10),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        yield
        await state["client"].aclose()

    app = FastAPI(lifespan=lifespan)

    @app.api_route("/v1/{path:path}", methods=["GET", "POST"])
    async def forward(path: str, request: Request) -> Response:
        client = state["client"]
        headers = {k: v for k, v in request.headers.items() if k not in drop}
        upstream_request = client.build_request(
            request.method, f"{upstream}/{path}", content=await request.body(), headers=headers
        )
        response = await client.send(upstream_request, stream=True)
        out = {k: v for k, v in response.headers.items() if k not in drop}
        if response.headers.get("content-type", "").startswith("text/event-stream"):

            async def relay() -> Any:
                try:
                    async for chunk in response.aiter_raw():
                        yield chunk
                finally:
                    await response.aclose()

            return StreamingResponse(relay(), status_code=response.status_code, headers=out)
        content = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
        return Response(content, status_code=response.status_code, headers=out)

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
    )


# ------------------------------------------------------------------------------------ the client side


def _template(home: Path) -> None:
    from kindling.mining.model import Example
    from kindling.templates import JsonDirStore, Template

    examples = [
        Example(tool_name=tool, context=f"{verb} {thing}", result=f"{tool} ok: {thing}")
        for tool, verb in (("read_file", "Read"), ("terminal", "Run the tests for"), ("patch", "Fix"))
        for thing in ("the parser", "the tokenizer", "setup.cfg", "the CLI", "the README")
    ]
    JsonDirStore(home / "templates").save(Template(name="code", task_type="code", examples=examples))


def _conversation(number: int) -> list[dict[str, Any]]:
    return [
        SYSTEM,
        {"role": "user", "content": f"Task {number}: read the parser, run its tests, fix what fails."},
    ]


def _client() -> httpx.Client:
    # No Nagle delay on the client's small writes (headers, then body), as async clients do by default.
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(timeout=30, transport=transport)


def _post(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[float, Any]:
    started = time.perf_counter()
    response = client.post(f"{url}/chat/completions", json=body, headers=headers)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, response.json()


def _first_chunk(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> float:
    started = time.perf_counter()
    with client.stream("POST", f"{url}/chat/completions", json=body, headers=headers) as response:
        response.raise_for_status()
        chunks = response.iter_raw()
        next(chunks)
        first = time.perf_counter() - started
        for _ in chunks:
            pass
    return first


def _next(messages: list[dict[str, Any]], reply: dict[str, Any], turn: int) -> None:
    messages.append(reply["choices"][0]["message"])
    messages.append({"role": "user", "content": f"Good. Now step {turn}: check the next module."})


def _stream_reply(messages: list[dict[str, Any]], turn: int) -> None:
    messages.append(
        {"role": "assistant", "content": "I read the file and ran the tests; all 12 pass now. " * 3}
    )
    messages.append({"role": "user", "content": f"Good. Now step {turn}: check the next module."})


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(urls: dict[str, str], conversations: int, offset: int) -> dict[str, list[float]]:
    """Per-call latency (seconds) of each target, conversations interleaved across targets."""
    seen: dict[str, list[float]] = {name: [] for name in urls}
    clients = {name: _client() for name in urls}
    try:
        for number in range(conversations):
            talks = {name: _conversation(offset + number) for name in urls}
            for turn in range(TURNS):
                for name, url in urls.items():
                    body = {"model": "fake-model", "messages": talks[name], "tools": TOOLS}
                    elapsed, reply = _post(clients[name], url, body, {})
                    seen[name].append(elapsed)
                    _next(talks[name], reply, turn)
    finally:
        for client in clients.values():
            client.close()
    return seen


def first_chunks(
    urls: dict[str, str], conversations: int, offset: int, headers: dict[str, str]
) -> dict[str, list[float]]:
    """Time to the first chunk of each streaming call, per target, interleaved."""
    seen: dict[str, list[float]] = {name: [] for name in urls}
    clients = {name: _client() for name in urls}
    try:
        for number in range(conversations):
            talks = {name: _conversation(offset + number) for name in urls}
            for turn in range(TURNS):
                for name, url in urls.items():
                    body = {"model": "fake-model", "messages": talks[name], "tools": TOOLS, "stream": True}
                    seen[name].append(_first_chunk(clients[name], url, body, headers))
                    _stream_reply(talks[name], turn)
    finally:
        for client in clients.values():
            client.close()
    return seen


def throughput(url: str, seconds: float, workers: int, offset: int, headers: dict[str, str]) -> float:
    """Completed calls per second with ``workers`` clients calling in a loop for ``seconds``."""
    calls, elapsed = load(url, seconds, workers, offset, headers)
    return calls / elapsed


def load(url: str, seconds: float, workers: int, offset: int, headers: dict[str, str]) -> tuple[int, float]:
    """Calls completed by ``workers`` clients calling in a loop for ``seconds``, and the time taken."""
    done = [0] * workers
    stop = time.monotonic() + seconds
    failures: list[BaseException] = []

    def work(index: int) -> None:
        number = offset + index * 100_000
        try:
            with _client() as client:
                # At least one call each: on a busy machine a thread may start after ``stop``, and a
                # rate of nothing would divide the report by zero.
                while True:
                    messages = _conversation(number)
                    number += 1
                    for turn in range(TURNS):
                        body = {"model": "fake-model", "messages": messages, "tools": TOOLS}
                        _, reply = _post(client, url, body, headers)
                        done[index] += 1
                        _next(messages, reply, turn)
                        if time.monotonic() >= stop:
                            return
        except BaseException as exc:
            failures.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return sum(done), time.monotonic() - started


def _drained(url: str, timeout: float = 30.0) -> dict[str, Any]:
    """The proxy's status once its recorder has written everything queued."""
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = httpx.get(url.removesuffix("/v1") + "/kindling/status", timeout=5).json()
        if status["recorder"]["pending"] == 0 or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short run (a few seconds)")
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=5.0, help="load time per throughput figure")
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="modelled time to first token")
    parser.add_argument("--chunk-ms", type=float, default=5.0, help="modelled time between events")
    parser.add_argument(
        "--metrics-overhead", action="store_true", help="only compare the proxy with metrics on and off"
    )
    parser.add_argument("--rounds", type=int, default=4, help="--metrics-overhead: throughput rounds each")
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake)
        return
    if args.serve_bare:
        serve_bare(int(args.serve_bare[0]), args.serve_bare[1])
        return
    conversations = 15 if args.quick else args.conversations
    seconds = 1.0 if args.quick else args.seconds
    if args.metrics_overhead:
        metrics_overhead(conversations, seconds, 2 if args.quick else args.rounds)
        return
    modelled = {"X-Fake-Latency": str(args.ttft_ms / 1000), "X-Fake-Chunk-Delay": str(args.chunk_ms / 1000)}

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _template(home)
        with _processes(home) as urls:
            targets = {"direct": urls["fake"], "bare": urls["bare"], "proxy": urls["proxy"]}
            latency(targets, 3, offset=10_000_000)  # warm the connections and the template store
            calls = latency(targets, conversations, offset=0)
            ttft = first_chunks(
                {"direct": urls["fake"], "proxy": urls["proxy"]},
                max(conversations // 3, 5),
                1_000_000,
                modelled,
            )
            rate_direct = throughput(urls["fake"], seconds, 8, 2_000_000, modelled)
            rate_proxy = throughput(urls["proxy"], seconds, 8, 3_000_000, modelled)
            rate_bare = throughput(urls["bare"], seconds, 8, 7_000_000, modelled)
            rate_direct_instant = throughput(urls["fake"], seconds, 8, 4_000_000, {})
            rate_proxy_instant = throughput(urls["proxy"], seconds, 8, 5_000_000, {})
            rate_bare_instant = throughput(urls["bare"], seconds, 8, 6_000_000, {})
            status = _drained(urls["proxy"])

    direct_p50, direct_p99 = _percentile(calls["direct"], 0.5), _percentile(calls["direct"], 0.99)
    added = {
        name: (_percentile(calls[name], 0.5) - direct_p50, _percentile(calls[name], 0.99) - direct_p99)
        for name in ("bare", "proxy")
    }
    print(
        f"non-streaming calls per target: {len(calls['direct'])} ({conversations} conversations of {TURNS})"
    )
    print(f"direct latency: p50 {direct_p50 * 1000:.3f} ms, p99 {direct_p99 * 1000:.3f} ms")
    for name, label in (("bare", "bare forwarder"), ("proxy", "kindling proxy")):
        p50, p99 = added[name]
        print(f"{label} added latency: p50 {p50 * 1000:.3f} ms, p99 {p99 * 1000:.3f} ms")
    print(
        f"proxy added p50 / bare forwarder added p50: {added['proxy'][0] / added['bare'][0]:.2f}x (target <= 1.25x)"
    )
    print(f"proxy added p99 / bare forwarder added p99: {added['proxy'][1] / added['bare'][1]:.2f}x")
    ttft_direct, ttft_proxy = statistics.median(ttft["direct"]), statistics.median(ttft["proxy"])
    print(
        f"streaming time to first chunk (server: {args.ttft_ms:.0f} ms to first token, {args.chunk_ms:.0f} ms "
        f"between events), median of {len(ttft['direct'])}: direct {ttft_direct * 1000:.3f} ms, "
        f"proxy {ttft_proxy * 1000:.3f} ms"
    )
    print(f"time to first chunk proxy/direct: {ttft_proxy / ttft_direct:.3f}x (target <= 1.1x)")
    print(
        f"throughput, 8 concurrent clients, modelled server: direct {rate_direct:.1f}/s, bare forwarder "
        f"{rate_bare:.1f}/s, proxy {rate_proxy:.1f}/s"
    )
    print(f"throughput proxy/direct: {rate_proxy / rate_direct:.2f}x (target >= 0.8x)")
    print(f"throughput bare forwarder/direct: {rate_bare / rate_direct:.2f}x")
    print(
        f"for information, instant server (CPU-bound: the client, the server and the proxy share this machine's "
        f"cores): direct {rate_direct_instant:.1f}/s, bare forwarder {rate_bare_instant:.1f}/s, proxy "
        f"{rate_proxy_instant:.1f}/s; proxy/direct {rate_proxy_instant / rate_direct_instant:.2f}x, "
        f"proxy/bare forwarder {rate_proxy_instant / rate_bare_instant:.2f}x"
    )
    recorder = status["recorder"]
    print(
        f"proxy: conversations {status['conversations']}, warmed {status['warmed']}, continued "
        f"{status['continued']}, replies recorded {status['replies']}, writes {recorder['written']}, pending "
        f"{recorder['pending']}, dropped {recorder['dropped']}"
    )


if __name__ == "__main__":
    main()
