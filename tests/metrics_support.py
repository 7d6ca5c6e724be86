"""Reading a service's /metrics in tests: every sample parsed by prometheus-client's own parser."""

from __future__ import annotations

import subprocess
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

#: A scrape: each sample's value by (name, sorted labels).
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(response: httpx.Response) -> Samples:
    """Every sample of a 200 /metrics answer in the Prometheus text format."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def moved(before: Samples, after: Samples) -> Samples:
    """What changed between two scrapes (new series count from zero)."""
    return {
        key: value - before.get(key, 0.0) for key, value in after.items() if value != before.get(key, 0.0)
    }


def requests_of(route: str, method: str, status: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The key of the requests counter for ``route``, ``method`` and ``status``."""
    return (
        "kindling_http_requests_total",
        (("method", method), ("route", route), ("status", str(status))),
    )


def wait_healthy(root: str, proc: subprocess.Popen[bytes], what: str, seconds: float = 30) -> None:
    """Wait until the service ``proc`` runs answers ``{root}/health`` with 200 (fail if it exits)."""
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, f"the {what} exited"
        try:
            if httpx.get(f"{root}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"the {what} did not start"
        time.sleep(0.05)
