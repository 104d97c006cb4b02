#!/usr/bin/env python3
"""The machine's copy bandwidth, the yardstick of issue 16's streaming target ("streamed decode
time <= 1.1 x max(resident time, streamed bytes / the machine's measured copy bandwidth)"):

- memcpy: one 256 MiB buffer copied into another (CPython's buffer slice assignment is a memcpy);
- pread: a file already in the page cache read into a reused buffer in 256 KiB positioned reads,
  the way the GGUF streamer's reader thread reads its tiles.

Median of ROUNDS passes each, GB/s (1e9 bytes). Not a CI step; ci/bench/runner.sh prints it.

    python3 ci/bench/copy_bandwidth.py FILE [ROUNDS]
"""

import os
import statistics
import sys
import time


def memcpy_gbps(rounds: int, size: int = 256 << 20) -> float:
    src = bytearray(os.urandom(1 << 20)) * (size >> 20)
    dst = bytearray(size)
    dst[:] = src  # touch every page once
    runs = []
    for _ in range(rounds):
        t = time.perf_counter()
        dst[:] = src
        runs.append(size / (time.perf_counter() - t) / 1e9)
    return statistics.median(runs)


def pread_gbps(path: str, rounds: int, tile: int = 256 << 10) -> float:
    size = os.path.getsize(path)
    buf = bytearray(tile)
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY)
    try:
        runs = []
        for i in range(rounds + 1):
            t = time.perf_counter()
            off = 0
            while off < size:
                n = os.preadv(fd, [view[: min(tile, size - off)]], off)
                if n <= 0:
                    break
                off += n
            if i > 0:  # the first pass brings the file into the page cache
                runs.append(size / (time.perf_counter() - t) / 1e9)
        return statistics.median(runs)
    finally:
        os.close(fd)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: copy_bandwidth.py FILE [ROUNDS]")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    print(
        f"memcpy {memcpy_gbps(rounds):.2f} GB/s; pread from the page cache "
        f"(256 KiB reads) {pread_gbps(sys.argv[1], rounds):.2f} GB/s"
    )


if __name__ == "__main__":
    main()
