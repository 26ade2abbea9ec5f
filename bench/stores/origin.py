#!/usr/bin/env python3
"""A tiny counting origin for bench/shared-proxies.sh.

Answers GET of any path with 200, a body of --body-size bytes that starts with the path, and
Cache-Control: max-age=3600, so that a cache in front keeps every page for the whole run. It counts the requests
it answers (and the distinct paths). Two paths are its own and are never counted:
    /__count   -> {"requests": N, "paths": M} (Cache-Control: no-store)
    /__reset   -> sets both to zero
HTTP/1.1 with keep-alive, one thread per connection. Prints "listening on HOST:PORT" once it listens.

Usage: origin.py [--host 127.0.0.1] --port PORT [--body-size 8192] [--delay-ms 0]
"""

import argparse
import http.server
import json
import sys
import threading
import time
import typing


class State:
    lock = threading.Lock()
    requests = 0
    paths: typing.ClassVar[set[str]] = set()


def make_handler(body_size, delay):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # One write per response (headers and body buffered, flushed after each request) and no Nagle: otherwise
        # the body waits for the peer's delayed ACK of the headers (~40 ms a response).
        wbufsize = 1 << 16
        disable_nagle_algorithm = True
        server_version = "bench-origin"
        sys_version = ""

        def log_message(self, *args):  # quiet: the count is the log
            pass

        def send_body(self, body, cache_control, content_type):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", cache_control)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            if self.path == "/__count":
                with State.lock:
                    body = json.dumps({"requests": State.requests, "paths": len(State.paths)}).encode()
                self.send_body(body, "no-store", "application/json")
                return
            if self.path == "/__reset":
                with State.lock:
                    State.requests = 0
                    State.paths = set()
                self.send_body(b"{}", "no-store", "application/json")
                return
            with State.lock:
                State.requests += 1
                State.paths.add(self.path)
            if delay:
                time.sleep(delay)
            head = f"<!doctype html><title>{self.path}</title><p>{self.path}</p>".encode()
            body = (head + b"x" * max(0, body_size - len(head)))[: max(body_size, 0)]
            self.send_body(body, "max-age=3600", "text/html")

        do_HEAD = do_GET

    return Handler


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: proxies open many upstream connections at once


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--body-size", type=int, default=8192)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="sleep this long before each counted answer")
    args = parser.parse_args()
    server = Server((args.host, args.port), make_handler(args.body_size, args.delay_ms / 1000))
    print(f"listening on {args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
