#!/usr/bin/env python3
"""Writes the keys redis-benchmark -r N reads (key:000000000000 .. key:<N-1>, 12 digits) with values of SIZE bytes,
so that its GET and MGET measurements read values of the size asked for and never miss.

Usage: redis_prefill.py HOST PORT KEYS SIZE
"""

import socket
import sys


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    host, port, keys, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    value = bytes((i % 251) for i in range(size))
    with socket.create_connection((host, port), timeout=30) as sock:
        reader = sock.makefile("rb")
        for start in range(0, keys, 100):
            batch = range(start, min(keys, start + 100))
            out = bytearray()
            for i in batch:
                key = b"key:%012d" % i
                out += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(key), key, size) + value + b"\r\n"
            sock.sendall(out)
            for _ in batch:
                line = reader.readline()
                if not line.startswith(b"+OK"):
                    sys.exit(f"redis_prefill.py: SET answered {line!r}")


if __name__ == "__main__":
    main()
