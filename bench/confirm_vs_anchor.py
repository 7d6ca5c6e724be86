"""kindling's confirmation daemon against the prototype's design (the anchor), interleaved in one run.

The anchor (``../shared/anchors/anchor_confirm.py``: aiohttp, pending requests in a dict, a SQLite
commit per event, no authentication) and kindling's daemon (``kindling confirm serve``, SQLite, and
PostgreSQL beside it) take the same load from the same client: N keep-alive connections, each
looping submit then approve. Targets run in turn, several rounds, order rotated each round, so a
noisy machine hurts all of them alike. Prints, per client count, submit→approve cycles a second,
p50/p99 latency of one request, kindling/anchor ratios, and a check that every acknowledged
request and decision is in the target's database (and that kindling's audit chain is intact).

The anchor needs aiohttp, which kindling does not depend on: this script makes a throwaway venv
for it under ``build/`` (``--anchor-python`` uses another interpreter instead).

    python bench/confirm_vs_anchor.py                       # 4 and 32 clients, 3 rounds of 5 s
    python bench/confirm_vs_anchor.py --quick               # a smoke run
    python bench/confirm_vs_anchor.py --clients 4 --seconds 10 --rounds 5 --no-postgresql
    python bench/confirm_vs_anchor.py --idempotency-keys    # every submit with a key, as kindling's client sends
    python bench/confirm_vs_anchor.py --metrics-overhead --no-postgresql  # metrics on against off
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kindling.confirm.settings import ConfirmSettings  # noqa: E402
from kindling.confirm.store import ConfirmationStore  # noqa: E402

PG_ADMIN = os.environ.get("KINDLING_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
ANCHORS = Path(os.environ.get("KINDLING_ANCHORS", str(ROOT.parent / "shared" / "anchors")))
ANCHOR_VENV = ROOT / "build" / "anchor-venv"


# -- a small HTTP/1.1 keep-alive client: the same few lines drive every target ----------------
class Connection:
    """One keep-alive connection that sends a request and reads one Content-Length response."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def request(
        self, method: str, path: str, body: object, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        payload = json.dumps(body).encode() if body is not None else b""
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            f"Content-Length: {len(payload)}",
        ]
        if body is not None:
            head.append("Content-Type: application/json")
        head.extend(f"{k}: {v}" for k, v in headers.items())
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length = 0
        chunked = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value.strip())
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
            return status, data
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@dataclass
class Run:
    """What one target did under one load: cycles, request latencies, acknowledged outcomes."""

    cycles: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # the server process's CPU seconds (all its threads) while it was driven
    latencies: list[float] = field(default_factory=list)
    acked: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, other: Run) -> None:
        self.cycles += other.cycles
        self.seconds += other.seconds
        self.cpu += other.cpu
        self.latencies.extend(other.latencies)
        self.acked.update(other.acked)
        self.errors.extend(other.errors)

    @property
    def cpu_per_cycle(self) -> float:
        """The server's CPU milliseconds per submit→approve cycle: what a busy machine disturbs least."""
        return self.cpu / self.cycles * 1000 if self.cycles else float("nan")

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        lat = sorted(self.latencies)
        return lat[min(len(lat) - 1, int(len(lat) * p))] * 1000 if lat else float("nan")


async def _drive(
    port: int, clients: int, seconds: float, agents: list[str], approver: str, keys: bool = False
) -> Run:
    run = Run()
    stop_at = time.perf_counter() + seconds

    async def client(n: int) -> None:
        conn = Connection(port)
        await conn.open()
        agent_auth = {"Authorization": f"Bearer {agents[n % len(agents)]}"} if agents[0] else {}
        approver_auth = {"Authorization": f"Bearer {approver}"} if approver else {}
        i = 0
        try:
            while time.perf_counter() < stop_at:
                i += 1
                body = {"action": f"bench_{n % 4}", "description": f"load {n}/{i}", "details": {"i": i}}
                t0 = time.perf_counter()
                # kindling's own client sends a fresh Idempotency-Key with every submit (--idempotency-keys).
                headers = {**agent_auth, "Idempotency-Key": f"{n}-{i}-{stop_at}"} if keys else agent_auth
                status, data = await conn.request("POST", "/confirm", body, headers)
                t1 = time.perf_counter()
                run.latencies.append(t1 - t0)
                if status not in (200, 202):
                    run.errors.append(f"submit {status}")
                    continue
                rid = json.loads(data)["id"]
                run.acked[rid] = "pending"
                status, data = await conn.request("POST", f"/confirm/{rid}/approve", {}, approver_auth)
                run.latencies.append(time.perf_counter() - t1)
                if status != 200:
                    run.errors.append(f"approve {status}")
                    continue
                run.acked[rid] = "approved"
                run.cycles += 1
        except (OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
            run.errors.append(type(exc).__name__)
        finally:
            conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    run.seconds = time.perf_counter() - started
    return run


# -- the targets ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(port: int, proc: subprocess.Popen[bytes], name: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode} before it answered")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{name} did not start")


def anchor_python(explicit: str | None) -> str:
    """Return an interpreter that has aiohttp, making the throwaway venv under build/ when needed."""
    if explicit:
        return explicit
    python = ANCHOR_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(ANCHOR_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import aiohttp"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "aiohttp"], check=True)
    return str(python)


class Target:
    """A server under test: how to start it, its tokens, and how to check what it acknowledged."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.agents: list[str] = [""]
        self.approver = ""

    def cpu_seconds(self) -> float:
        """CPU seconds the server process has used so far (user + system, every thread)."""
        if self.proc is None:
            return 0.0
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def lost(self, acked: dict[str, str]) -> int:
        raise NotImplementedError


class Anchor(Target):
    def __init__(self, python: str, db: str) -> None:
        super().__init__("anchor")
        self.db = db
        self.port = free_port()
        script = ANCHORS / "anchor_confirm.py"
        if not script.exists():
            raise SystemExit(f"the anchor is not at {script} (set KINDLING_ANCHORS)")
        self.proc = subprocess.Popen(
            [python, str(script), str(self.port), db], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_healthy(self.port, self.proc, "the anchor")

    def lost(self, acked: dict[str, str]) -> int:
        with sqlite3.connect(self.db) as conn:
            found = dict(conn.execute("SELECT id, status FROM audit_log").fetchall())
        return sum(1 for rid, status in acked.items() if found.get(rid) != status)


class Kindling(Target):
    def __init__(
        self, name: str, db: str, clients: int, src: Path = ROOT / "src", env: dict[str, str] | None = None
    ) -> None:
        super().__init__(name)
        self.db = db
        self.store = ConfirmationStore(db, ConfirmSettings(db=db))
        # A fleet: one agent token per client, as agents really run.
        self.agents = [self.store.create_token("agent", f"bench-agent-{n}")[1] for n in range(clients)]
        self.approver = self.store.create_token("approver", "bench-approver")[1]
        self.port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(src),
            # The bench measures the cycle, not the limits: lift them past what a run can submit.
            "KINDLING_CONFIRM_RATE_LIMIT": "1000000",
            "KINDLING_CONFIRM_TOKEN_RATE_LIMIT": "1000000",
            **(env or {}),
        }
        cmd = [sys.executable, "-m", "kindling", "confirm", "serve", "--port", str(self.port), "--db", db]
        self.proc = subprocess.Popen(
            [*cmd, "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_healthy(self.port, self.proc, name)

    def lost(self, acked: dict[str, str]) -> int:
        lost = 0
        for rid, status in acked.items():
            try:
                lost += self.store.get(rid).status != status
            except Exception:
                lost += 1
        return lost

    def audit_ok(self) -> bool:
        return self.store.verify_audit().ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--seconds", type=float, default=5.0, help="per target, per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-postgresql", action="store_true", help="leave kindling on PostgreSQL out")
    parser.add_argument("--anchor-python", help="an interpreter with aiohttp (default: a venv under build/)")
    parser.add_argument("--quick", action="store_true", help="4 and 32 clients, 1 round of 1 s: a smoke run")
    parser.add_argument(
        "--kindling-src",
        nargs="+",
        default=[],
        metavar="DIR",
        help="also run kindling on SQLite from these source trees (another commit's src/, say: "
        "`git worktree add /tmp/old <commit>` then /tmp/old/src), interleaved with the rest",
    )
    parser.add_argument(
        "--idempotency-keys",
        action="store_true",
        help="send a fresh Idempotency-Key with every submit, as kindling's own client does "
        "(the anchor ignores the header)",
    )
    parser.add_argument(
        "--metrics-overhead",
        action="store_true",
        help="also run kindling on SQLite with metrics off (KINDLING_CONFIRM_METRICS=off), interleaved, "
        "and print metrics on / off",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rounds = 1.0, 1
    python = anchor_python(args.anchor_python)
    print(f"confirm_vs_anchor: load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at start")
    ok = True
    pg_db = ""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            targets: list[Target] = [
                Anchor(python, str(Path(tmp) / "anchor.db")),
                Kindling("kindling-sqlite", str(Path(tmp) / "kindling.db"), max(args.clients)),
            ]
            for n, src in enumerate(args.kindling_src):
                name = f"kindling-sqlite-{Path(src).resolve().parent.name}"
                db = str(Path(tmp) / f"kindling-{n}.db")
                targets.append(Kindling(name, db, max(args.clients), Path(src).resolve()))
            if args.metrics_overhead:
                db = str(Path(tmp) / "kindling-metrics-off.db")
                off = {"KINDLING_CONFIRM_METRICS": "off"}
                targets.append(Kindling("kindling-sqlite-metrics-off", db, max(args.clients), env=off))
            if not args.no_postgresql:
                import psycopg

                pg_db = f"kindling_bench_{uuid.uuid4().hex[:10]}"
                with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                    admin.execute(f'CREATE DATABASE "{pg_db}"')
                url = f"{PG_ADMIN.rpartition('/')[0]}/{pg_db}"
                targets.append(Kindling("kindling-postgresql", url, max(args.clients)))
            results: dict[tuple[str, int], Run] = {}
            for clients in args.clients:
                for r in range(args.rounds):
                    order = targets[r % len(targets) :] + targets[: r % len(targets)]
                    for target in order:
                        cpu_before = target.cpu_seconds()
                        run = asyncio.run(
                            _drive(
                                target.port,
                                clients,
                                args.seconds,
                                target.agents[:clients],
                                target.approver,
                                args.idempotency_keys,
                            )
                        )
                        run.cpu = target.cpu_seconds() - cpu_before
                        results.setdefault((target.name, clients), Run()).add(run)
            for clients in args.clients:
                anchor = results[("anchor", clients)]
                for target in targets:
                    run = results[(target.name, clients)]
                    lost = target.lost(run.acked)
                    audit = ""
                    if isinstance(target, Kindling):
                        good = target.audit_ok()
                        audit = f" audit={'ok' if good else 'BROKEN'}"
                        ok &= good
                    ok &= lost == 0 and not run.errors and run.cycles > 0
                    print(
                        f"confirm_vs_anchor clients={clients} {target.name}: cycles/s={run.rate:.1f} "
                        f"p50_ms={run.percentile(0.5):.2f} p99_ms={run.percentile(0.99):.2f} "
                        f"cpu_ms/cycle={run.cpu_per_cycle:.3f} "
                        f"acked={len(run.acked)} lost={lost} errors={len(run.errors)}{audit}"
                    )
                for name in [t.name for t in targets if t.name != "anchor"]:
                    run = results[(name, clients)]
                    if name != "kindling-sqlite":
                        mine = results[("kindling-sqlite", clients)]
                        print(
                            f"confirm_vs_anchor clients={clients} ratio {name}/kindling-sqlite: "
                            f"cycles/s {run.rate / mine.rate:.3f}x, "
                            f"server CPU a cycle {run.cpu_per_cycle / mine.cpu_per_cycle:.3f}x"
                        )
                    print(
                        f"confirm_vs_anchor clients={clients} ratio {name}/anchor: "
                        f"cycles/s {run.rate / anchor.rate:.2f}x, "
                        f"p99 {run.percentile(0.99) / anchor.percentile(0.99):.2f}x"
                    )
                if args.metrics_overhead:
                    on = results[("kindling-sqlite", clients)]
                    off_run = results[("kindling-sqlite-metrics-off", clients)]
                    print(
                        f"confirm_vs_anchor clients={clients} metrics on/off: "
                        f"cycles/s {on.rate / off_run.rate:.3f}x, "
                        f"p99 {on.percentile(0.99) / off_run.percentile(0.99):.2f}x, "
                        f"server CPU a cycle {on.cpu_per_cycle / off_run.cpu_per_cycle:.3f}x"
                    )
        finally:
            for target in locals().get("targets", []):
                target.stop()
                if isinstance(target, Kindling):
                    target.store.close()
            if pg_db:
                import psycopg

                with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{pg_db}" WITH (FORCE)')
    print(f"confirm_vs_anchor: load average {os.getloadavg()[0]:.2f} at end")
    print(f"confirm_vs_anchor: {'nothing lost' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
