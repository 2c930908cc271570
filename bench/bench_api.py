"""Load bench of the REST API: a real server on loopback, bounded load, figures printed.

    python bench/bench_api.py [--duration 5] [--connections 16] [--server granian|uvicorn]

It starts ``farebox serve`` itself (127.0.0.1, a free port, a fresh SQLite file; or the same app
under uvicorn for comparison), then:

1. reads: ``GET /v1/plans/{id}`` of a finished plan (plan JSON included), the catalog
   (``/v1/catalog/models``) and ``/health``, each for ``--duration`` seconds or ``--max-requests``
   requests, from ``--connections`` keep-alive connections; prints req/s, p50, p99, max;
2. overload: ``--posts`` plan submissions (scenarios/tiny.toml) from ``--post-connections``
   concurrent clients against a queue of ``--queue-max``; prints 202s and 503s (each 503 must carry
   Retry-After), the slowest answer (no hang), then waits (bounded) for every accepted plan and
   checks that none was lost: each is done.

The client is a minimal HTTP/1.1 keep-alive client on asyncio streams (pre-encoded requests,
Content-Length framing) so that it, not httpx, sets the ceiling as little as possible; it shares the
machine's cores with the server, so the figures are a floor of what the server does alone.
Only loopback addresses are used; every loop is bounded in time and count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    retry_after_missing: int = 0
    bodies: list[bytes] = field(default_factory=list)


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes
) -> tuple[int, dict[str, str], bytes]:
    writer.write(raw)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


def _get(path: str, port: int) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode()


def _post(path: str, port: int, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _client(
    port: int, raw: bytes, tally: Tally, deadline: float, budget: list[int], keep: bool
) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            start = time.perf_counter()
            status, headers, body = await asyncio.wait_for(_request(reader, writer, raw), 60)
            tally.latencies_s.append(time.perf_counter() - start)
            tally.statuses[status] = tally.statuses.get(status, 0) + 1
            if status == 503 and "retry-after" not in headers:
                tally.retry_after_missing += 1
            if keep:
                tally.bodies.append(body)
    finally:
        writer.close()


async def _load(
    port: int, raw: bytes, connections: int, duration_s: float, max_requests: int, keep: bool
) -> tuple[Tally, float]:
    tally = Tally()
    budget = [max_requests]
    start = time.perf_counter()
    deadline = time.monotonic() + duration_s
    await asyncio.gather(
        *(_client(port, raw, tally, deadline, budget, keep) for _ in range(connections))
    )
    return tally, time.perf_counter() - start


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(name: str, tally: Tally, elapsed_s: float) -> None:
    lat = tally.latencies_s
    print(
        f"{name:<28} {len(lat):>7} req {len(lat) / elapsed_s:>9.0f} req/s   "
        f"p50 {_quantile(lat, 0.5) * 1e3:6.2f} ms  p99 {_quantile(lat, 0.99) * 1e3:7.2f} ms  "
        f"max {max(lat) * 1e3:7.1f} ms   statuses {dict(sorted(tally.statuses.items()))}"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _start(server: str, port: int, db: Path, queue_max: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FAREBOX_DB": str(db),
        "FAREBOX_QUEUE_MAX": str(queue_max),
        "FAREBOX_WORKERS": "1",
    }
    if server == "granian":
        cmd = [
            sys.executable,
            "-c",
            "import sys; from api.cli import main; sys.exit(main())",
            "serve",
            "--host",
            HOST,
            "--port",
            str(port),
        ]
    else:
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "api.app:create_app",
            "--host",
            HOST,
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5) as s:
                s.sendall(_get("/health", port))
                if b" 200 " in s.recv(64):
                    return proc
        except OSError:
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("server never became healthy")


async def _bench(args: argparse.Namespace, port: int) -> int:
    tiny = json.dumps(msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes()))
    body = tiny.encode()
    tally, _ = await _load(port, _post("/v1/plans?wait=60", port, body), 1, 90, 1, keep=True)
    plan_id = json.loads(tally.bodies[0])["id"]
    print(
        f"server: {args.server}, 1 HTTP worker, 1 solver worker; {args.connections} keep-alive "
        f"connections, {args.duration:g} s or {args.max_requests} requests per read endpoint"
    )
    for name, path in (
        ("GET /v1/plans/{id}", f"/v1/plans/{plan_id}"),
        ("GET /v1/catalog/models", "/v1/catalog/models"),
        ("GET /v1/catalog/accelerators", "/v1/catalog/accelerators"),
        ("GET /health", "/health"),
    ):
        await _load(port, _get(path, port), args.connections, 0.5, 500, keep=False)  # warm
        tally, elapsed = await _load(
            port, _get(path, port), args.connections, args.duration, args.max_requests, keep=False
        )
        _report(name, tally, elapsed)

    print(
        f"\noverload: {args.posts} POST /v1/plans from {args.post_connections} clients, "
        f"queue_max={args.queue_max}, 1 solver worker"
    )
    tally, elapsed = await _load(
        port, _post("/v1/plans", port, body), args.post_connections, 120, args.posts, keep=True
    )
    _report("POST /v1/plans (overload)", tally, elapsed)
    accepted = [json.loads(b)["id"] for b in tally.bodies if b and b'"href"' in b]
    refused = tally.statuses.get(503, 0)
    print(
        f"  accepted {len(accepted)}, refused 503 {refused} (without Retry-After: "
        f"{tally.retry_after_missing}), other {len(tally.latencies_s) - len(accepted) - refused}"
    )
    start = time.monotonic()
    lost = []
    reader, writer = await asyncio.open_connection(HOST, port)
    for pid in accepted:
        while True:
            status, _, raw = await _request(reader, writer, _get(f"/v1/plans/{pid}", port))
            state = json.loads(raw)["status"] if status == 200 else f"http {status}"
            if state not in ("queued", "running"):
                break
            if time.monotonic() - start > args.drain_timeout:
                state = "still " + state
                break
            await asyncio.sleep(0.2)
        if state != "done":
            lost.append((pid, state))
    writer.close()
    drained = time.monotonic() - start
    print(
        f"  every accepted plan finished: {not lost} ({len(accepted) - len(lost)}/"
        f"{len(accepted)} done, drained in {drained:.1f} s, "
        f"{len(accepted) / max(drained, 1e-9):.2f} solves/s)"
    )
    for pid, state in lost:
        print(f"  NOT DONE: {pid}: {state}")
    return 1 if lost or tally.retry_after_missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", choices=("granian", "uvicorn"), default="granian")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--posts", type=int, default=40)
    parser.add_argument("--post-connections", type=int, default=8)
    parser.add_argument("--queue-max", type=int, default=4)
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = _start(
            args.server, port, Path(tmp) / "bench.sqlite", args.queue_max, Path(tmp) / "server.log"
        )
        try:
            return asyncio.run(_bench(args, port))
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


if __name__ == "__main__":
    sys.exit(main())
