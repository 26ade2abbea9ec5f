"""The storage rules, differentially: a few thousand random responses (and requests and settings), decided by the
Rust front's rules, then judged by every other language's runner, which must agree on every one; and a sample of
them sent through a real `larder serve`, which must store exactly the ones the rules store, for the reason they give.

The hand-written cases of spec/vectors/storage.json say what the rules are; this finds what nobody thought to write
a case for (a directive spelled oddly, two fields that disagree, a date one parser takes and another refuses). The
generator is seeded (the seed is printed, `--seed N` replays it) and the whole run is bounded in time. A
disagreement prints the case, which belongs in storage.json once the spec (spec/HTTP.md) says who is right.

    python3 spec/storage_differential.py [--seed N] [--cases 3000] [--front 300]
"""

from __future__ import annotations

import argparse
import email.utils
import gzip
import http.server
import importlib.util
import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSWER = [str(ROOT / "target" / "debug" / "larder-conformance"), "--answer"]
LARDER = str(ROOT / "target" / "debug" / "larder")

def every_runner() -> dict[str, list[str]]:
    """spec/conformance.py's runners: one list for both scripts (loaded by path: other `conformance` modules exist)."""
    spec = importlib.util.spec_from_file_location("larder_spec_conformance", ROOT / "spec" / "conformance.py")
    if spec is None or spec.loader is None:
        raise SystemExit("storage differential: cannot load spec/conformance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.RUNNERS)


EVERY_RUNNER = every_runner()

#: Every language's runner but Rust's, whose rules answer the cases.
RUNNERS = {language: command for language, command in EVERY_RUNNER.items() if language != "rust"}
#: The languages whose runner said the storage rules do not apply to them (yet).
NOT_APPLICABLE: set[str] = set()
T0 = 1_700_000_000_000

NUMBERS = ["0", "1", "60", "3600", "-1", '"60"', "1.5", "", "2147483648", "99999999999999999999", "007", "60s"]
DIRECTIVES = [
    "max-age={n}", "s-maxage={n}", "no-store", "no-cache", "private", "public", "must-revalidate",
    "proxy-revalidate", "must-understand", "stale-while-revalidate={n}", "stale-if-error={n}", "immutable",
    "no-transform", "x-unknown={n}", 'no-cache="set-cookie"', 'private="x"', "MAX-AGE={n}", "max-age = {n}",
]
SF_DIRECTIVES = [
    "max-age={i}", "s-maxage={i}", "no-store", "no-cache", "private", "public", "must-revalidate",
    "stale-while-revalidate={i}", "stale-if-error={i}", "must-understand", 'no-cache="a"', "x=(1 2)", "max-age=?1",
    "max-age=1.5", "max-age=-1", "max-age={i};p=1", "@bad", 'private="x"',
]
STATUSES = [200, 200, 200, 203, 204, 206, 300, 301, 302, 304, 307, 308, 404, 405, 410, 414, 451, 500, 501, 503, 599, 600]


def http_date(ms: int, form: int = 0) -> str:
    seconds = ms / 1000
    if form == 1:
        return time.strftime("%A, %d-%b-%y %H:%M:%S GMT", time.gmtime(seconds))
    if form == 2:
        return time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(seconds))
    return email.utils.formatdate(seconds, usegmt=True)


def directives(rng: random.Random, pool: list[str], numbers: list[str]) -> str:
    chosen = [rng.choice(pool).format(n=rng.choice(numbers), i=rng.choice(["0", "60", "600", "3600"])) for _ in range(rng.randint(1, 3))]
    return rng.choice([", ", ",", " , "]).join(chosen)


def random_case(rng: random.Random, index: int, now_ms: int | None = None) -> dict[str, object]:
    """A random case; with `now_ms`, one for the front, at the real time, whose decision no second of the run's
    own time can change: no response delay, dates 0 or 10 s before it, and no lifetime under a minute (the front
    decides when the request reaches it, seconds later on a loaded machine: a 7 s `s-maxage=007` expired on the
    way once, and the front rightly did not store what the rules, at the case's own time, stored)."""
    front = now_ms is not None
    request_time = now_ms if now_ms is not None else T0 + rng.randint(0, 10**6) * 1000
    response_time = request_time + (0 if front else rng.choice([0, 0, 0, 500, 3000]))
    numbers = [n for n in NUMBERS if n not in ("1", "1.5", "60s", "007")] if front else NUMBERS
    headers: list[list[str]] = []
    if rng.random() < 0.8:
        headers.append(["Cache-Control", directives(rng, DIRECTIVES, numbers)])
        if rng.random() < 0.15:
            headers.append(["Cache-Control", directives(rng, DIRECTIVES, numbers)])
    if rng.random() < 0.25:
        headers.append(["CDN-Cache-Control", directives(rng, SF_DIRECTIVES, numbers)])
        if rng.random() < 0.2:
            # A second line, perhaps empty: the lines are one field joined with commas.
            headers.insert(rng.randrange(len(headers) + 1), ["CDN-Cache-Control", rng.choice(["", "private", "max-age=60", ":aG=:", "?0"])])
    if rng.random() < 0.15:
        headers.append(["Surrogate-Control", rng.choice(['content="ESI/1.0"', "max-age=60", "no-store", "max-age=60+30", "max-age=60;edge", ""])])
    date = response_time - (rng.choice([0, 10_000]) if front else rng.choice([0, 0, 1000, 10_000, -5000]))
    if rng.random() < 0.85:
        headers.append(["Date", http_date(date) if rng.random() < 0.95 else "yesterday"])
    if rng.random() < 0.3:
        expires = [http_date(date + rng.choice([-10_000, 0, 60_000, 3_600_000]), rng.choice([0, 0, 1, 2])), "0", "-1",
                   "Thu, 32 Jan 2026 00:00:00 GMT", "Wednesday, 06-Nov-74 08:49:37 GMT", "Monday, 06-Nov-73 08:49:37 GMT"]
        headers.append(["Expires", rng.choice(expires)])
    if rng.random() < 0.2:
        headers.append(["Age", rng.choice(["0", "10", "100000", "-5", "x", "1, 2"])])
    if rng.random() < 0.2:
        headers.append(["ETag", '"v1"'])
    if rng.random() < 0.2:
        headers.append(["Last-Modified", http_date(date - rng.choice([3_600_000, 86_400_000]))])
    if rng.random() < 0.1:
        headers.append(["Set-Cookie", "session=1"])
    if rng.random() < 0.25:
        headers.append(["Vary", rng.choice(["Accept-Encoding", "accept, User-Agent", "*", "Cookie, cookie", "", "Accept-Encoding, Accept"])])
    if rng.random() < 0.2:
        # The front's cases get bodies the origin can encode (the standard library has gzip, not br or zstd).
        codings = ["gzip", "GZIP", "deflate", "x-custom"] if front else ["gzip", "GZIP", "br", "zstd", "deflate", "x-custom"]
        headers.append(["Content-Encoding", rng.choice(codings)])
    request_headers: list[list[str]] = []
    if rng.random() < 0.1:
        request_headers.append(["Authorization", "Bearer x"])
    if rng.random() < 0.1:
        request_headers.append(["Cache-Control", rng.choice(["no-store", "no-cache", "max-age=0"])])
    rules: dict[str, object] = {}
    if front:
        pass
    elif rng.random() < 0.2:
        rules["cache_set_cookie"] = True
    if rng.random() < 0.2:
        rules["stale_while_revalidate_secs"] = rng.choice([0, 30])
    if not front and rng.random() < 0.1:
        rules["stale_if_error_secs"] = 0
    if not front and rng.random() < 0.1:
        rules["surrogate_control"] = False
    if not front and rng.random() < 0.1:
        rules["targeted_fields"] = []
    return {
        "name": f"random_{index}",
        "note": "generated by spec/storage_differential.py",
        "rules": rules,
        "request": {"method": "GET" if front else rng.choice(["GET"] * 18 + ["HEAD", "POST"]), "headers": request_headers},
        "response": {"status": rng.choice(STATUSES), "headers": headers},
        "request_time_ms": request_time,
        "response_time_ms": response_time,
        "expected": {},
    }


def answered_by_rust(cases: list[dict[str, object]], defaults: dict[str, object], work: Path) -> dict[str, object]:
    unanswered = work / "unanswered.json"
    unanswered.write_text(json.dumps({"schema": 1, "rules_defaults": defaults, "cases": cases}))
    done = subprocess.run([*ANSWER, str(unanswered)], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def agreement(language: str, command: list[str], path: Path) -> list[str]:
    """The names of the cases `language` decides differently (the runner reports at most 20)."""
    done = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return [f"(the {language} runner failed: {done.stderr.strip()[-300:]})"]
    if report.get("status") == "pass":
        return []
    if report.get("status") == "not_applicable":
        print(f"storage differential: {language} does not apply the storage rules yet: {report.get('reason')}")
        NOT_APPLICABLE.add(language)
        return []
    return [str(name) for name in report.get("failed") or [report.get("reason")]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def through_the_front(cases: list[dict[str, object]], defaults: dict[str, object]) -> list[str]:
    """GET cases with default settings through a real `larder serve`: stored exactly when the rules store."""
    by_path = {f"/{c['name']}": c for c in cases}

    class Origin(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            case = by_path[self.path]
            response = case["response"]
            # send_response_only: the case's own Date, not one the server adds.
            self.send_response_only(int(response["status"]))  # type: ignore[index]
            for name, value in response["headers"]:  # type: ignore[index]
                self.send_header(name, value)
            body = b"" if response["status"] in (204, 304) else b"page"  # type: ignore[index]
            codings = [v.strip().lower() for n, v in response["headers"] if n.lower() == "content-encoding"]  # type: ignore[index]
            if body and codings == ["gzip"]:
                body = gzip.compress(body)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    listen = f"127.0.0.1:{free_port()}"
    front = subprocess.Popen(
        [LARDER, "serve", "--upstream", f"http://127.0.0.1:{origin.server_address[1]}", "--listen", listen,
         "--no-admin", "--workers", "1", "--hit-for-miss", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    disagreements = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(tuple(listen.split(":")), timeout=1).close()  # type: ignore[arg-type]
                break
            except OSError:
                time.sleep(0.05)
        for path, case in by_path.items():
            request = urllib.request.Request(f"http://{listen}{path}", headers=dict(case["request"]["headers"]))  # type: ignore[index]
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    status = answer.headers.get("cache-status", "")
            except urllib.error.HTTPError as error:
                status = error.headers.get("cache-status", "")
            expected = case["expected"]
            stored = "stored" in status
            if stored != expected["stored"]:  # type: ignore[index]
                disagreements.append(f"{case['name']}: the rules say stored={expected['stored']}, the front said {status!r}")  # type: ignore[index]
            elif not stored and f"detail={expected['reason']}" not in status:  # type: ignore[index]
                disagreements.append(f"{case['name']}: the rules say {expected['reason']}, the front said {status!r}")  # type: ignore[index]
    finally:
        front.kill()
        origin.shutdown()
    return disagreements


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 31))
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--front", type=int, default=300, help="how many GET cases also go through larder serve")
    args = parser.parse_args()
    print(f"storage differential: seed {args.seed} (replay with --seed {args.seed}), {args.cases} + {args.front} cases")
    rng = random.Random(args.seed)
    defaults = json.loads((ROOT / "spec" / "vectors" / "storage.json").read_text())["rules_defaults"]
    cases = [random_case(rng, i) for i in range(args.cases)]
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # The front's sample first, at the real time, while that time is still now.
        now_ms = int(time.time()) * 1000
        front_cases = [random_case(rng, args.cases + i, now_ms) for i in range(args.front)]
        sample = answered_by_rust(front_cases, defaults, work)["cases"]
        problems += through_the_front(sample, defaults)  # type: ignore[arg-type]
        answered = answered_by_rust(cases + front_cases, defaults, work)
        path = work / "storage.json"
        path.write_text(json.dumps(answered))
        for language, command in RUNNERS.items():
            problems += [f"{language} disagrees with Rust on {name}" for name in agreement(language, command, path)]
        by_name = {c["name"]: c for c in answered["cases"]}
        for problem in problems:
            print(f"storage differential: {problem}")
            name = problem.split(" on ")[-1].split(":")[0]
            if name in by_name:
                print(json.dumps(by_name[name]))
    if problems:
        print(f"storage differential: {len(problems)} disagreements (seed {args.seed})")
        return 1
    print(
        f"storage differential: {', '.join(r for r in RUNNERS if r not in NOT_APPLICABLE)} and the front agree with"
        f" the Rust rules on every case"
        f" ({len(sample)} through the front)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
