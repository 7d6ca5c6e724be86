"""Load on the confirmation daemon: N clients submit and decide for a fixed time; nothing may be lost.

Runs a real daemon (``python -m kindling confirm serve``) in a subprocess on loopback, once on SQLite
and once on PostgreSQL. Each client loops: submit as an agent, then approve or deny as an approver.
Prints requests/second, p50/p99 latency, and a check that every accepted request and every winning
decision is in the database with an intact audit chain. The speed figure is also printed as a ratio
against ``GET /health`` driven by the same clients in the same run (the cost of HTTP alone).

    python bench/confirm_load.py                 # both backends, 8 clients, 10 s each
    python bench/confirm_load.py --quick         # a few seconds, for the smoke test
    python bench/confirm_load.py --backend sqlite --clients 16 --seconds 30

Each backend also runs one client's submit+approve loop alone and beside ``--waiters`` (256) idle
long polls (``GET /confirm/{id}?wait=60`` on requests nobody decides), alternating, and prints the
loop's rate with waiters as a ratio of its rate without (the target is at least 0.8x: a decision
must wake only its own request's waiters).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kindling.confirm.settings import ConfirmSettings  # noqa: E402
from kindling.confirm.store import ConfirmationStore  # noqa: E402

PG_ADMIN = os.environ.get("KINDLING_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_daemon(db: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "KINDLING_CONFIRM_RATE_LIMIT": "100000000",
        "KINDLING_CONFIRM_TOKEN_RATE_LIMIT": "100000000",
        "KINDLING_CONFIRM_MAX_WAITS_PER_TOKEN": "100000",
        "KINDLING_CONFIRM_MAX_WAITS": "100000",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kindling",
            "confirm",
            "serve",
            "--port",
            str(port),
            "--db",
            db,
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the daemon did not start")


def drive(url: str, clients: int, seconds: float, work: str, agent: str, approver: str) -> dict[str, object]:
    """Run ``clients`` threads for ``seconds``; return latencies, counts and what was accepted."""
    latencies: list[float] = []
    accepted: dict[str, str] = {}
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(n: int) -> None:
        mine: list[float] = []
        decided: dict[str, str] = {}
        with httpx.Client(base_url=url, timeout=30) as http:
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                try:
                    if work == "health":
                        t0 = time.perf_counter()
                        r = http.get("/health")
                        mine.append(time.perf_counter() - t0)
                        continue
                    t0 = time.perf_counter()
                    r = http.post(
                        "/confirm",
                        json={
                            "action": f"bench_{n % 4}",
                            "description": f"load {n}/{i}",
                            "details": {"client": n, "i": i},
                        },
                        headers={"Authorization": f"Bearer {agent}", "Idempotency-Key": uuid.uuid4().hex},
                    )
                    mine.append(time.perf_counter() - t0)
                    if r.status_code != 202:
                        errors.append(f"submit {r.status_code}")
                        continue
                    rid = r.json()["id"]
                    verb = "approve" if i % 2 else "deny"
                    t0 = time.perf_counter()
                    d = http.post(
                        f"/confirm/{rid}/{verb}",
                        json={"reason": "bench"},
                        headers={"Authorization": f"Bearer {approver}"},
                    )
                    mine.append(time.perf_counter() - t0)
                    if d.status_code != 200:
                        errors.append(f"decide {d.status_code}")
                        decided[rid] = "pending"
                    else:
                        decided[rid] = "approved" if verb == "approve" else "denied"
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
        with lock:
            latencies.extend(mine)
            accepted.update(decided)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {
        "latencies": latencies,
        "accepted": accepted,
        "errors": errors,
        "elapsed": time.monotonic() - started,
    }


class IdleWaiters:
    """``n`` long polls held open on requests nobody decides, each renewed when its wait ends."""

    def __init__(self, url: str, token: str, request_ids: list[str]) -> None:
        self.url, self.token, self.ids = url, token, request_ids
        self.stop = threading.Event()
        self.answers = 0  # waits that ended (each after its full wait, if nothing wakes it)
        self.errors: list[str] = []
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()))

    async def _main(self) -> None:
        limits = httpx.Limits(max_connections=len(self.ids) + 8, max_keepalive_connections=len(self.ids) + 8)
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(base_url=self.url, timeout=120, limits=limits) as http:

            async def hold(rid: str) -> None:
                while not self.stop.is_set():
                    try:
                        r = await http.get(f"/confirm/{rid}", params={"wait": 60}, headers=headers)
                        self.answers += 1
                        if r.status_code != 200:
                            self.errors.append(f"wait {r.status_code}")
                    except httpx.HTTPError as exc:
                        self.errors.append(type(exc).__name__)
                        await asyncio.sleep(0.1)

            tasks = [asyncio.create_task(hold(rid)) for rid in self.ids]
            while not self.stop.is_set():
                await asyncio.sleep(0.05)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def __enter__(self) -> IdleWaiters:
        self.thread.start()
        time.sleep(1.0)  # let every wait reach the daemon
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def run_waiters(name: str, url: str, store: ConfirmationStore, waiters: int, seconds: float) -> bool:
    """One client's loop alone and beside ``waiters`` idle long polls, alternating; print the ratio."""
    agent = store.create_token("agent", "bench-waiter-loop")[1]
    approver = store.create_token("approver", "bench-waiter-approver")[1]
    idle_agent = store.create_token("agent", "bench-idle")[1]
    idle_ids = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for i in range(waiters):
            r = http.post(
                "/confirm",
                json={"action": "idle", "description": f"nobody decides {i}", "timeout_seconds": 3600},
                headers={"Authorization": f"Bearer {idle_agent}"},
            )
            idle_ids.append(r.json()["id"])
    alone = beside = 0.0
    errors: list[str] = []
    woken = 0
    for _ in range(2):
        run = drive(url, 1, seconds, "decide", agent, approver)
        alone += len(run["latencies"]) / 2 / float(run["elapsed"])  # type: ignore[arg-type]
        errors += run["errors"]  # type: ignore[operator]
        with IdleWaiters(url, idle_agent, idle_ids) as idle:
            run = drive(url, 1, seconds, "decide", agent, approver)
            woken += idle.answers
            errors += idle.errors
        beside += len(run["latencies"]) / 2 / float(run["elapsed"])  # type: ignore[arg-type]
        errors += run["errors"]  # type: ignore[operator]
    print(
        f"confirm_load {name}: one client's loop alone {alone / 2:.1f} cycles/s, beside {waiters} idle "
        f"long polls {beside / 2:.1f} cycles/s: ratio {beside / alone:.2f}x (target >= 0.8x) "
        f"woken_waiters={woken} errors={len(errors)}"
    )
    return not errors


def run_backend(name: str, db: str, clients: int, seconds: float, waiters: int) -> bool:
    store = ConfirmationStore(db, ConfirmSettings(db=db))
    agent = store.create_token("agent", "bench-agent")[1]
    approver = store.create_token("approver", "bench-approver")[1]
    proc, url = start_daemon(db)
    try:
        base = drive(url, clients, min(seconds, 3.0), "health", agent, approver)
        load = drive(url, clients, seconds, "decide", agent, approver)
        waiters_ok = run_waiters(name, url, store, waiters, seconds) if waiters else True
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    lat = sorted(load["latencies"])  # type: ignore[arg-type]
    base_rps = len(base["latencies"]) / float(base["elapsed"])  # type: ignore[arg-type]
    rps = len(lat) / float(load["elapsed"])  # type: ignore[arg-type]
    p50 = statistics.median(lat) * 1000 if lat else float("nan")
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else float("nan")
    accepted: dict[str, str] = load["accepted"]  # type: ignore[assignment]
    lost = sum(1 for rid, status in accepted.items() if _status(store, rid) != status)
    audit = store.verify_audit()
    store.close()
    errors: list[str] = load["errors"]  # type: ignore[assignment]
    print(
        f"confirm_load {name}: clients={clients} seconds={seconds:g} requests={len(lat)} "
        f"rps={rps:.1f} p50_ms={p50:.1f} p99_ms={p99:.1f} accepted={len(accepted)} lost={lost} "
        f"errors={len(errors)} audit={'ok' if audit.ok else 'BROKEN'} audit_events={audit.rows}"
    )
    print(
        f"confirm_load {name}: ratio submit+decide rps / health rps = {rps / base_rps:.3f} "
        f"(health rps={base_rps:.1f})"
    )
    return lost == 0 and audit.ok and not errors and bool(accepted) and waiters_ok


def _status(store: ConfirmationStore, rid: str) -> str:
    try:
        return store.get(rid).status
    except Exception:
        return "missing"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--waiters", type=int, default=256, help="idle long polls beside one loop (0: skip)")
    parser.add_argument("--quick", action="store_true", help="4 clients for 1 s: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds = 4, 1.0
    ok = True
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            ok &= run_backend("sqlite", str(Path(tmp) / "bench.db"), args.clients, args.seconds, args.waiters)
    if args.backend in ("postgresql", "both"):
        name = f"kindling_bench_{uuid.uuid4().hex[:10]}"
        base, _, _ = PG_ADMIN.rpartition("/")
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            ok &= run_backend("postgresql", f"{base}/{name}", args.clients, args.seconds, args.waiters)
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"confirm_load: {'nothing lost' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
