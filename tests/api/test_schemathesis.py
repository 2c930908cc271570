"""Schemathesis over every operation of the OpenAPI document, with every check (``--checks
all``), against a real ``farebox serve`` (granian) on a loopback port: no request may get a 5xx,
and every other check passes (settings and the one widened expectation, with its reason, in
tests/api/schemathesis.toml).

The run is bounded (``--max-examples``, a fixed seed, a request timeout) to ~45 s on 2 cores;
the request count and the status codes, read from schemathesis' HAR report, are printed (run
with ``-s`` to see them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.api.test_durability import _server

HERE = Path(__file__).resolve().parent
MAX_EXAMPLES = 30
SEED = 1


def test_schemathesis_finds_no_server_error_and_no_failed_check(tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("st")
    assert st.exists(), "schemathesis is in the `test` extra: pip install -e '.[test]'"
    har = tmp_path / "schemathesis.har"
    with _server(tmp_path / "plans.sqlite", tmp_path / "server.log") as (_, url):
        result = subprocess.run(
            [
                str(st),
                "--config-file",
                str(HERE / "schemathesis.toml"),
                "run",
                f"{url}/schema/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                str(MAX_EXAMPLES),
                "--seed",
                str(SEED),
                "--workers",
                "1",
                "--request-timeout",
                "30",
                "--report",
                "har",
                "--report-har-path",
                str(har),
                "--no-color",
            ],
            cwd=tmp_path,  # its example database (.schemathesis/) stays out of the repo
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    entries = json.loads(har.read_text())["log"]["entries"]
    statuses = Counter(int(e["response"]["status"]) for e in entries)
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    print(
        f"\nschemathesis: {len(entries)} requests, {server_errors} 5xx; "
        f"by status {dict(sorted(statuses.items()))}"
    )
    assert server_errors == 0, result.stdout[-6000:]
    assert result.returncode == 0, result.stdout[-6000:]
    operations = re.search(r"Operations:\s+(\d+) selected / (\d+) total", result.stdout)
    assert operations and operations[1] == operations[2], result.stdout[-3000:]  # all of them
    assert len(entries) >= 1000, len(entries)  # the run really exercised the API
