#!/usr/bin/env python3
"""Parsers and the report for bench/stores.sh (standard library only).

    parse.py larder FILE [--round N]            larder bench stores --json lines -> result lines
    parse.py memaslap FILE --op OP --size BYTES --store NAME [--round N]
    parse.py redis FILE --op OP --size BYTES --store NAME [--round N]
    parse.py report RESULTS --target 0.8 [--json] [--header TEXT]
    parse.py raw RESULTS [--header TEXT]          the rounds in bench/report.py's raw form (for make bench's charts)

Every result line is one JSON object: {round, store, op, size, tool, ops_per_sec, p99_ms, p99_approx, errors,
misses, lookups, client_cpu_us, server_cpu_us}. "tool" is "larder" or the reference client's name; the CPU figures
are microseconds per operation (the client's user + system time, and the server's, over the run, given by
stores.sh as --client-cpu and --server-cpu seconds), None when not measured. The report takes the median of the
rounds for each (store, op, size, tool) and divides larder's ops/s by the reference's.
"""

import argparse
import csv
import json
import re
import statistics
import sys


def die(message):
    print(f"parse.py: {message}", file=sys.stderr)
    sys.exit(1)


def emit(row):
    print(json.dumps(row, sort_keys=True))


def cpu_fields(ops, client_s, server_s):
    """The CPU a run used, in microseconds per operation of the `ops` it measured."""
    per_op = lambda s: round(s * 1e6 / ops, 2) if s is not None and ops > 0 else None
    return {"client_cpu_us": per_op(client_s), "server_cpu_us": per_op(server_s)}


# --------------------------------------------------------------------------------------------------------------
# larder bench stores --json: {store, op, size, ops_per_sec, p99_ms, errors} per line.


def parse_larder(path, round_no, store_name, seconds=0.0, client_s=None, server_s=None):
    rows = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            figure = json.loads(line)
            emit(
                {
                    "round": round_no,
                    "store": store_name or figure["store"],
                    "op": figure["op"],
                    "size": int(figure["size"]),
                    "tool": "larder",
                    "ops_per_sec": float(figure["ops_per_sec"]),
                    "p99_ms": float(figure["p99_ms"]),
                    "p99_approx": False,
                    "errors": int(figure.get("errors", 0)),
                    "misses": None,
                    "lookups": None,
                    # larder bench stores prints ops/s over a phase of --seconds.
                    **cpu_fields(float(figure["ops_per_sec"]) * seconds, client_s, server_s),
                }
            )
            rows += 1
    if rows == 0:
        die(f"{path}: no JSON line from larder bench stores")


# --------------------------------------------------------------------------------------------------------------
# memaslap (memcaslap): with -S equal to the run time it prints, per kind, "Get Statistics (N events)" followed by
# a log2 histogram of latencies in microseconds: the value in bucket k counts latencies in (2^(k-1), 2^k] us. With
# -d 100 an event is one multi-get of 100 keys (cmd_get counts keys). The final line is
# "Run time: 3.0s Ops: N TPS: X Net_rate: ..." (its Ops include the warm-up sets of a get-only run, so they are not
# used here).


def log2_p99_ms(dist):
    """Upper bound of the log2 bucket holding the 99th percentile, in ms."""
    total = sum(dist.values())
    if total == 0:
        return None
    wanted = 0.99 * total
    seen = 0
    for bucket in sorted(dist):
        seen += dist[bucket]
        if seen >= wanted:
            return (2**bucket) / 1000.0
    return (2 ** max(dist)) / 1000.0


def parse_memaslap_text(text, kind):
    section = re.search(
        rf"^{kind} Statistics \((\d+) events\)\n(.*?)(?:\n\s*\n|\Z)", text, flags=re.MULTILINE | re.DOTALL
    )
    if not section:
        return None, None
    events = int(section.group(1))
    dist = {}
    in_dist = False
    for line in section.group(2).splitlines():
        if "Log2 Dist" in line:
            in_dist = True
            continue
        if in_dist:
            m = re.match(r"\s*(\d+):\s*(.*)$", line)
            if not m:
                break
            start = int(m.group(1))
            for i, count in enumerate(m.group(2).split()):
                dist[start + i] = dist.get(start + i, 0) + int(count)
    return events, dist


def parse_memaslap(path, op, size, store_name, round_no, client_s=None, server_s=None):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().replace("\r", "")
    run_time = re.search(r"Run time: ([0-9.]+)s", text)
    if not run_time:
        die(f"{path}: memaslap printed no 'Run time' line:\n{text[-2000:]}")
    seconds = float(run_time.group(1))
    kind = "Set" if op == "set" else "Get"
    events, dist = parse_memaslap_text(text, kind)
    if events is None:
        die(f"{path}: memaslap printed no '{kind} Statistics (N events)' block (was -S given?)")
    cmd_get = int(re.search(r"cmd_get: (\d+)", text).group(1))
    misses = int(re.search(r"get_misses: (\d+)", text).group(1))
    emit(
        {
            "round": round_no,
            "store": store_name,
            "op": op,
            "size": size,
            "tool": "memaslap",
            "ops_per_sec": events / seconds if seconds > 0 else 0.0,
            "p99_ms": log2_p99_ms(dist),
            "p99_approx": True,
            "errors": 0,
            "misses": misses if op != "set" else None,
            "lookups": cmd_get if op != "set" else None,
            **cpu_fields(events, client_s, server_s),
        }
    )


# --------------------------------------------------------------------------------------------------------------
# redis-benchmark --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
# "p99_latency_ms","max_latency_ms" (Redis 7).


def parse_redis(path, op, size, store_name, round_no, requests=0, client_s=None, server_s=None):
    with open(path, encoding="utf-8", errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    header = None
    figure = None
    for row in rows:
        if row[0] == "test":
            header = row
            continue
        if header:
            figure = dict(zip(header, row))
    if not figure or "rps" not in figure:
        die(f"{path}: no CSV figures from redis-benchmark")
    p99 = figure.get("p99_latency_ms")
    emit(
        {
            "round": round_no,
            "store": store_name,
            "op": op,
            "size": size,
            "tool": "redis-benchmark",
            "ops_per_sec": float(figure["rps"]),
            "p99_ms": float(p99) if p99 not in (None, "") else None,
            "p99_approx": False,
            "errors": 0,
            "misses": None,
            "lookups": None,
            **cpu_fields(requests, client_s, server_s),
        }
    )


# --------------------------------------------------------------------------------------------------------------
# The report.

OP_ORDER = {"get": 0, "get_many": 1, "set": 2}
OP_LABEL = {"get": "get", "get_many": "get_many(100)", "set": "set"}


def size_label(size):
    if size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} B"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def report(path, target, as_json, header, store_order, seconds):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    if not rows:
        die(f"{path}: no results")
    groups = {}
    for r in rows:
        groups.setdefault((r["store"], r["op"], r["size"]), {}).setdefault(r["tool"], []).append(r)

    order = {name: i for i, name in enumerate(store_order)}

    def sort_key(key):
        store, op, size = key
        return (order.get(store, len(order)), store, size, OP_ORDER.get(op, 9), op)

    out = []
    for key in sorted(groups, key=sort_key):
        store, op, size = key
        tools = groups[key]
        larder = tools.get("larder", [])
        refs = [(name, rs) for name, rs in tools.items() if name != "larder"]
        ref_name, ref = refs[0] if refs else (None, [])
        cpu = lambda rs, side: med([r[side] for r in rs if r.get(side) is not None])
        l_ops = med([r["ops_per_sec"] for r in larder])
        l_p99 = med([r["p99_ms"] for r in larder])
        r_ops = med([r["ops_per_sec"] for r in ref]) if ref else None
        r_p99 = med([r["p99_ms"] for r in ref]) if ref else None
        ratio = (l_ops / r_ops) if (l_ops is not None and r_ops) else None
        errors = sum(r["errors"] for r in larder)
        # larder bench stores prints ops/s over the phase, failed operations included: their share of it.
        attempted = sum(r["ops_per_sec"] * seconds for r in larder)
        error_share = min(1.0, errors / attempted) if attempted > 0 else None
        ref_misses = sum(r["misses"] or 0 for r in ref)
        ref_lookups = sum(r["lookups"] or 0 for r in ref)
        out.append(
            {
                "store": store,
                "op": op,
                "size": size,
                "rounds": len(larder),
                "larder_ops_per_sec": round(l_ops) if l_ops is not None else None,
                "larder_ops_per_sec_min": round(min(r["ops_per_sec"] for r in larder)) if larder else None,
                "larder_ops_per_sec_max": round(max(r["ops_per_sec"] for r in larder)) if larder else None,
                "larder_p99_ms": l_p99,
                "larder_errors": errors,
                "larder_error_share": round(error_share, 4) if error_share is not None else None,
                "reference": ref_name,
                "reference_ops_per_sec": round(r_ops) if r_ops is not None else None,
                "reference_p99_ms": r_p99,
                "reference_p99_is_log2_upper_bound": bool(ref and ref[0]["p99_approx"]),
                "reference_miss_ratio": (ref_misses / ref_lookups) if ref_lookups else None,
                "larder_client_cpu_us": cpu(larder, "client_cpu_us"),
                "larder_server_cpu_us": cpu(larder, "server_cpu_us"),
                "reference_client_cpu_us": cpu(ref, "client_cpu_us"),
                "reference_server_cpu_us": cpu(ref, "server_cpu_us"),
                "ratio": round(ratio, 3) if ratio is not None else None,
                "target_ratio": target if ref else None,
                # A ratio made of failed operations means nothing: no verdict when more than 1% failed.
                "target_met": (ratio >= target) if ratio is not None and (error_share or 0) <= 0.01 else None,
            }
        )

    if as_json:
        for row in out:
            print(json.dumps(row))
        return

    if header:
        print(header)
        print()
    fmt = "{:<10} {:<14} {:>7} {:>12} {:>9} {:>13} {:<15} {:>12} {:>9} {:>13} {:>7}  {}"
    print(fmt.format("store", "op", "size", "larder ops/s", "p99 ms", "CPU µs/op c/s", "reference", "ref ops/s",
                     "p99 ms", "CPU µs/op c/s", "ratio", "notes"))

    def cpu_cell(row, who):
        client, server = row[f"{who}_client_cpu_us"], row[f"{who}_server_cpu_us"]
        if client is None:
            return "-"
        return f"{client:.1f}/{server:.1f}" if server is not None else f"{client:.1f}"

    for row in out:
        notes = []
        if row["target_met"] is not None:
            notes.append(f">= {target}x {'met' if row['target_met'] else 'MISSED'}")
        elif row["ratio"] is not None:
            notes.append("no verdict: over 1% of larder's ops failed")
        if row["larder_errors"]:
            share = row["larder_error_share"] or 0.0
            notes.append(f"larder errors: {row['larder_errors']} (~{100 * share:.0f}% of its ops, counted in ops/s)")
        if row["reference_miss_ratio"]:
            notes.append(f"reference misses: {100 * row['reference_miss_ratio']:.1f}%")
        ref_p99 = "-"
        if row["reference_p99_ms"] is not None:
            ref_p99 = ("<=" if row["reference_p99_is_log2_upper_bound"] else "") + f"{row['reference_p99_ms']:.3f}"
        print(
            fmt.format(
                row["store"],
                OP_LABEL.get(row["op"], row["op"]),
                size_label(row["size"]),
                f"{row['larder_ops_per_sec']:,}" if row["larder_ops_per_sec"] is not None else "-",
                f"{row['larder_p99_ms']:.3f}" if row["larder_p99_ms"] is not None else "-",
                cpu_cell(row, "larder"),
                row["reference"] or "-",
                f"{row['reference_ops_per_sec']:,}" if row["reference_ops_per_sec"] is not None else "-",
                ref_p99,
                cpu_cell(row, "reference"),
                f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-",
                "; ".join(notes),
            ).rstrip()
        )
    print()
    print(f"ratio = larder ops/s / reference ops/s, medians of {max(r['rounds'] for r in out)} interleaved round(s);")
    print(f"target: ratio >= {target}. get_many and memaslap multi-get (-d 100) and MGET count one op per batch of")
    print("100 keys. memaslap's p99 is the upper bound of its log2 latency bucket (<=); redis-benchmark's is exact.")
    print("CPU µs/op c/s: the client's and the server's CPU per operation over the run (medians); a client's includes")
    print("its start and what it writes before measuring. The clients and the server share the machine's cores.")


# The targets of issue 18 for the store clients: (store, op, size) -> larder / reference ops/s at least.
RAW_TARGETS = [
    ("redis", "get_many", 1024, 1.0),
    ("memcached", "set", 102400, 0.9),
    ("redis", "set", 102400, 0.9),
]


def raw(path, header):
    """bench/report.py's raw lines: one case per store, op and size; larder against the reference tool."""
    with open(path, encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    tools = sorted({r["tool"] for r in rows if r["tool"] != "larder"})
    case = lambda r: f"{r['store']} {OP_LABEL.get(r['op'], r['op'])} {size_label(r['size'])}"
    targets = [
        {"case": f"{store} {OP_LABEL[op]} {size_label(size)}", "vs": tool, "metric": "ops", "ratio": ratio}
        for store, op, size, ratio in RAW_TARGETS
        for tool in tools
        if any(r["store"] == store and r["op"] == op and r["size"] == size and r["tool"] == tool for r in rows)
    ]
    print(json.dumps({
        "meta": True, "bench": "stores", "title": "Store clients against each server's own benchmark client",
        "command": "bench/stores.sh", "setup": header, "subject": "larder",
        "metrics": [{"name": "ops", "label": "ops/s", "better": "higher"},
                    {"name": "p99_ms", "label": "p99 ms", "better": "lower"},
                    {"name": "client_cpu_us", "label": "client CPU µs/op", "better": "lower"},
                    {"name": "server_cpu_us", "label": "server CPU µs/op", "better": "lower"}],
        "targets": targets,
    }))
    for r in rows:
        print(json.dumps({"bench": "stores", "case": case(r), "subject": r["tool"], "round": r["round"],
                          "ops": r["ops_per_sec"], "p99_ms": r["p99_ms"], "errors": r["errors"],
                          "client_cpu_us": r.get("client_cpu_us"), "server_cpu_us": r.get("server_cpu_us")}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("larder")
    p.add_argument("file")
    p.add_argument("--round", type=int, default=0)
    p.add_argument("--store", default="")
    p.add_argument("--seconds", type=float, default=0.0, help="the measurement's seconds (for CPU per operation)")

    def cpu_options(p):
        p.add_argument("--client-cpu", type=float, help="the client's CPU seconds over the run")
        p.add_argument("--server-cpu", type=float, help="the server's CPU seconds over the run")

    cpu_options(p)
    for name in ("memaslap", "redis"):
        p = sub.add_parser(name)
        p.add_argument("file")
        p.add_argument("--op", required=True, choices=["get", "get_many", "set"])
        p.add_argument("--size", type=int, required=True)
        p.add_argument("--store", required=True)
        p.add_argument("--round", type=int, default=0)
        cpu_options(p)
        if name == "redis":
            p.add_argument("--requests", type=int, default=0, help="redis-benchmark's -n (for CPU per operation)")
    p = sub.add_parser("raw")
    p.add_argument("results")
    p.add_argument("--header", default="")
    p = sub.add_parser("report")
    p.add_argument("results")
    p.add_argument("--target", type=float, default=0.8)
    p.add_argument("--json", action="store_true")
    p.add_argument("--header", default="")
    p.add_argument("--stores", default="memcached,redis,file,sqlite", help="order of the stores in the table")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per larder measurement")
    args = parser.parse_args()
    if args.what == "larder":
        parse_larder(args.file, args.round, args.store, args.seconds, args.client_cpu, args.server_cpu)
    elif args.what == "memaslap":
        parse_memaslap(args.file, args.op, args.size, args.store, args.round, args.client_cpu, args.server_cpu)
    elif args.what == "redis":
        parse_redis(args.file, args.op, args.size, args.store, args.round, args.requests, args.client_cpu,
                    args.server_cpu)
    elif args.what == "raw":
        raw(args.results, args.header)
    else:
        report(args.results, args.target, args.json, args.header, args.stores.split(","), args.seconds)


if __name__ == "__main__":
    main()
