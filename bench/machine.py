"""Describe this machine the way docs/benchmarks.md names the machine behind each table.

Prints the number of cores, the load average and the disk's sync time: the median time of an
``fsync`` after a 4 KiB write, in the folder given (default: the current one), which is what a
durable commit waits for. Throughput that commits (the confirmation daemon, the proxy's recorder)
moves with it more than with anything else.

    .venv/bin/python bench/machine.py           # 200 syncs in the current folder
    .venv/bin/python bench/machine.py --dir build --syncs 500
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def sync_time(directory: Path, syncs: int) -> float:
    """Return the median seconds of one 4 KiB write followed by ``fsync``, over ``syncs`` tries."""
    block = os.urandom(4096)
    times = []
    with tempfile.NamedTemporaryFile(dir=directory, prefix="kindling-sync-") as handle:
        fd = handle.fileno()
        for _ in range(syncs):
            os.pwrite(fd, block, 0)
            start = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="a folder on the disk to measure")
    parser.add_argument("--syncs", type=int, default=200, help="how many syncs to time (median kept)")
    args = parser.parse_args()
    seconds = sync_time(args.dir, max(1, args.syncs))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"cores {os.cpu_count()}, load average {load:.2f}, disk sync {seconds * 1e6:.0f} µs (median of {args.syncs})"
    )


if __name__ == "__main__":
    main()
