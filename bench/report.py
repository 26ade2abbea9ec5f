#!/usr/bin/env python3
"""bench/report.py: the statistics, tables and charts of every side-by-side benchmark, in one place.

Why: each benchmark script used to compute its own medians and ratios in awk and print its own table; the figures of
one script could not be compared with another's, and docs/benchmarks.md was typed by hand. Now a script writes its
raw measurements (one JSON line per measurement, per round) and this file turns them into the same table, the same
JSON summary and the same chart, whatever the script.

Raw file (JSON lines):
  one meta line:  {"meta": true, "bench": "peers", "title": "...", "command": "...", "setup": "...",
                   "subject": "larder", "metrics": [{"name": "rps", "label": "req/s", "better": "higher"}, ...],
                   "targets": [{"case": "10k", "vs": "nginx", "metric": "rps", "ratio": 1.3}, ...]}
  measurements:   {"bench": "peers", "case": "10k", "subject": "nginx", "round": 1, "rps": 51234.5, "p99_ms": 2.1}
  optional in the meta line: "pairs": [{"subject": "larder-l2", "vs": "nginx"}, ...], the comparisons to show when
  there is more than one larder setup (default: the subject against every other server); a target may name its
  own "subject" too.

A target's ratio is the subject's median over the peer's (`case` "*" means every case). For a "higher" metric the
target is met when the ratio is at least `ratio`; for a "lower" one (latency) when it is at most `ratio`.
`"every_round": true` also requires the subject to meet it against the peer in every round (same round, same load).

Usage:
  bench/report.py table RAW...            the table on a terminal (medians, min-max, ratios, targets)
  bench/report.py markdown RAW...         the same as Markdown, with the command and date, for docs/benchmarks.md
  bench/report.py json RAW...             one JSON summary per subject and case
  bench/report.py svg RAW... --out DIR    one chart per benchmark and metric: DIR/<bench>-<metric>.svg
Only the standard library.
"""

from __future__ import annotations

import argparse
import html
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Metric:
    name: str
    label: str
    better: str  # "higher" or "lower"


@dataclass
class Target:
    case: str
    vs: str
    metric: str
    ratio: float
    every_round: bool = False
    subject: str = ""


@dataclass
class Bench:
    """One benchmark's measurements and what they are compared against."""

    name: str
    title: str = ""
    command: str = ""
    setup: str = ""
    date: str = ""
    subject: str = "larder"
    metrics: list[Metric] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: (case, subject) -> metric -> {round: value}
    values: dict[tuple[str, str], dict[str, dict[int, float]]] = field(default_factory=dict)
    cases: list[str] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)

    def add(self, row: dict[str, Any]) -> None:
        case, subject, rnd = str(row["case"]), str(row["subject"]), int(row.get("round", 1))
        if case not in self.cases:
            self.cases.append(case)
        if subject not in self.subjects:
            self.subjects.append(subject)
        cell = self.values.setdefault((case, subject), {})
        for metric in self.metrics:
            value = row.get(metric.name)
            if isinstance(value, (int, float)) and value >= 0:
                cell.setdefault(metric.name, {})[rnd] = float(value)

    def series(self, case: str, subject: str, metric: str) -> dict[int, float]:
        return self.values.get((case, subject), {}).get(metric, {})

    def median(self, case: str, subject: str, metric: str) -> float | None:
        values = list(self.series(case, subject, metric).values())
        return statistics.median(values) if values else None

    def spread(self, case: str, subject: str, metric: str) -> tuple[float, float] | None:
        values = list(self.series(case, subject, metric).values())
        return (min(values), max(values)) if values else None

    def metric(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"{self.name}: no metric {name!r} in the meta line")

    def peers(self) -> list[str]:
        return [s for s in self.subjects if s != self.subject]

    def comparisons(self) -> list[tuple[str, str]]:
        """(subject, peer) pairs to show."""
        return self.pairs or [(self.subject, peer) for peer in self.peers()]

    def is_subject(self, name: str) -> bool:
        return any(name == a for a, _ in self.comparisons()) or name == self.subject


def load(paths: list[Path]) -> list[Bench]:
    """Benchmarks in the order their meta lines appear; a measurement before its meta line is an error."""
    benches: dict[str, Bench] = {}
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"report.py: {path}:{number}: not JSON: {e}") from None
            name = str(row.get("bench", ""))
            if row.get("meta"):
                bench = benches.setdefault(name, Bench(name))
                bench.title = str(row.get("title", name))
                bench.command = str(row.get("command", ""))
                bench.setup = str(row.get("setup", ""))
                bench.date = str(row.get("date", ""))
                bench.subject = str(row.get("subject", "larder"))
                bench.metrics = [Metric(m["name"], m.get("label", m["name"]), m.get("better", "higher"))
                                 for m in row.get("metrics", [])]
                bench.targets = [Target(t.get("case", "*"), t["vs"], t["metric"], float(t["ratio"]),
                                        bool(t.get("every_round", False)), str(t.get("subject", bench.subject)))
                                 for t in row.get("targets", [])]
                bench.pairs = [(str(p["subject"]), str(p["vs"])) for p in row.get("pairs", [])]
                bench.notes = [str(n) for n in row.get("notes", [])]
            elif name in benches:
                benches[name].add(row)
            else:
                raise SystemExit(f"report.py: {path}:{number}: a measurement of {name!r} before its meta line")
    return list(benches.values())


@dataclass
class Verdict:
    target: Target
    case: str
    ratio: float | None
    met: bool
    #: Whether the metric is better higher (a target is a floor) or lower (a ceiling).
    higher: bool = True
    rounds_met: int = 0
    rounds: int = 0

    def describe(self) -> str:
        t = self.target
        sign = ">=" if self.higher else "<="
        if self.ratio is None:
            return f"{t.metric} vs {t.vs}: no figure"
        shown = f"{self.ratio:.2f}"
        if not self.met and shown == f"{t.ratio:.2f}":
            shown = f"{self.ratio:.4f}"  # 1.2997 missed 1.3: never print "1.30x MISSED"
        text = f"{t.subject} {t.metric} {sign} {t.ratio:g}x {t.vs}: {shown}x {'met' if self.met else 'MISSED'}"
        if t.every_round:
            text += f" ({self.rounds_met}/{self.rounds} rounds)"
        return text


def ratio(bench: Bench, case: str, metric: str, peer: str, subject: str = "") -> float | None:
    mine, theirs = bench.median(case, subject or bench.subject, metric), bench.median(case, peer, metric)
    if mine is None or not theirs:
        return None
    return mine / theirs


def verdicts(bench: Bench, case: str) -> list[Verdict]:
    out = []
    for target in bench.targets:
        if target.case not in ("*", case) or target.vs not in bench.subjects or target.subject not in bench.subjects:
            continue
        higher = bench.metric(target.metric).better == "higher"
        r = ratio(bench, case, target.metric, target.vs, target.subject)
        met = r is not None and (r >= target.ratio if higher else r <= target.ratio)
        verdict = Verdict(target, case, r, met, higher)
        if target.every_round:
            mine = bench.series(case, target.subject, target.metric)
            theirs = bench.series(case, target.vs, target.metric)
            shared = [k for k in mine if k in theirs and theirs[k] > 0]
            verdict.rounds = len(shared)
            verdict.rounds_met = sum(
                1 for k in shared
                if (mine[k] / theirs[k] >= target.ratio if higher else mine[k] / theirs[k] <= target.ratio)
            )
            verdict.met = verdict.met and verdict.rounds_met == verdict.rounds
        out.append(verdict)
    return out


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def rows(bench: Bench) -> list[list[str]]:
    """The table: one row per case and subject; for the subject, its ratio to each peer per metric."""
    header = ["case", "server"]
    for m in bench.metrics:
        header += [m.label, "(min-max)"]
    header += [f"ratio ({bench.subject} / this)", "targets"]
    table = [header]
    for case in bench.cases:
        for subject in bench.subjects:
            if (case, subject) not in bench.values:
                continue
            row = [case, subject]
            for m in bench.metrics:
                spread = bench.spread(case, subject, m.name)
                row += [fmt(bench.median(case, subject, m.name)),
                        f"({fmt(spread[0])}-{fmt(spread[1])})" if spread else ""]
            ratios = []
            for mine, peer in bench.comparisons():
                if peer != subject:
                    continue
                for m in bench.metrics:
                    r = ratio(bench, case, m.name, subject, mine)
                    if r is not None:
                        who = f"{mine} " if mine != bench.subject else ""
                        ratios.append(f"{who}{m.label} {r:.2f}x")
            met = [v.describe() for v in verdicts(bench, case) if v.target.vs == subject]
            row += ["; ".join(ratios), "; ".join(met)]
            table.append(row)
    return table


def print_table(bench: Bench, markdown: bool) -> None:
    table = rows(bench)
    if markdown:
        print(f"### {bench.title}\n")
        if bench.command:
            print(f"`{bench.command}`" + (f" ({bench.date})" if bench.date else "") + "\n")
        if bench.setup:
            print(bench.setup + "\n")
        print("| " + " | ".join(table[0]) + " |")
        print("|" + "---|" * len(table[0]))
        for row in table[1:]:
            print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    else:
        print(f"{bench.title}" + (f"  [{bench.date}]" if bench.date else ""))
        if bench.setup:
            print(bench.setup)
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        for row in table:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    for note in bench.notes:
        print(("\n" if markdown else "") + note)
    missed = [v for case in bench.cases for v in verdicts(bench, case) if not v.met]
    met = [v for case in bench.cases for v in verdicts(bench, case) if v.met]
    if met or missed:
        print(("\n" if markdown else "") + f"Targets: {len(met)} met, {len(missed)} missed" +
              (": " + "; ".join(f"{v.case} {v.describe()}" for v in missed) if missed else ""))
    print()


def summary(bench: Bench) -> list[dict[str, Any]]:
    out = []
    for case in bench.cases:
        for subject in bench.subjects:
            if (case, subject) not in bench.values:
                continue
            row: dict[str, Any] = {"bench": bench.name, "case": case, "subject": subject}
            for m in bench.metrics:
                spread = bench.spread(case, subject, m.name)
                row[m.name] = bench.median(case, subject, m.name)
                row[f"{m.name}_min"], row[f"{m.name}_max"] = spread if spread else (None, None)
                row[f"{m.name}_rounds"] = len(bench.series(case, subject, m.name))
            for mine, peer in bench.comparisons():
                if peer == subject:
                    for m in bench.metrics:
                        row[f"{mine}_{m.name}_ratio"] = ratio(bench, case, m.name, subject, mine)
            targets = [
                {"subject": v.target.subject, "metric": v.target.metric, "ratio": v.ratio, "target": v.target.ratio,
                 "met": v.met, **({"rounds_met": v.rounds_met, "rounds": v.rounds} if v.target.every_round else {})}
                for v in verdicts(bench, case) if v.target.vs == subject
            ]
            if targets:
                row["targets"] = targets
            out.append(row)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Charts: grouped horizontal bars, one group per case, one bar per server (the median; a line from min to max).

def svg(bench: Bench, metric: Metric) -> str:
    # larder first and in warm colours, its peers after it in cool ones, the same in every chart.
    mine = [s for s in bench.subjects if bench.is_subject(s)]
    subjects = mine + [s for s in bench.subjects if s not in mine]
    warm, cool = ["#d95f02", "#e6ab02", "#e7298a"], ["#7570b3", "#1b9e77", "#666666", "#66a61e", "#a6761d"]
    colours = {s: warm[i % len(warm)] for i, s in enumerate(mine)}
    colours.update({s: cool[i % len(cool)] for i, s in enumerate(subjects[len(mine):])})
    bar, gap, left, right, top = 16, 14, 150, 150, 46
    groups = [(case, [s for s in subjects if bench.series(case, s, metric.name)]) for case in bench.cases]
    groups = [(c, ss) for c, ss in groups if ss]
    height = top + sum(len(ss) * bar + gap for _, ss in groups) + 30
    width = 760
    peak = max((bench.spread(c, s, metric.name) or (0, 0))[1] for c, ss in groups for s in ss) if groups else 1
    peak = peak or 1
    scale = (width - left - right) / peak
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="12">'),
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="14" font-weight="bold">{html.escape(bench.title)}</text>',
           f'<text x="10" y="36" fill="#555">{html.escape(metric.label)} (median of rounds, line: min-max; '
           f'{"higher" if metric.better == "higher" else "lower"} is better)'
           + (f", {html.escape(bench.date)}" if bench.date else "") + "</text>"]
    y = top
    for case, ss in groups:
        out.append(f'<text x="10" y="{y + len(ss) * bar / 2 + 4}" font-weight="bold">{html.escape(case)}</text>')
        for s in ss:
            median = bench.median(case, s, metric.name) or 0
            lo, hi = bench.spread(case, s, metric.name) or (0, 0)
            w = max(median * scale, 1)
            out.append(f'<text x="{left - 6}" y="{y + bar - 4}" text-anchor="end">{html.escape(s)}</text>')
            out.append(f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{bar - 4}" fill="{colours[s]}"/>')
            out.append(f'<line x1="{left + lo * scale:.1f}" x2="{left + hi * scale:.1f}" y1="{y + bar / 2}" '
                       f'y2="{y + bar / 2}" stroke="black" stroke-width="1.5"/>')
            label = fmt(median)
            for mine, peer in bench.comparisons():
                if peer == s and mine in ss:
                    r = ratio(bench, case, metric.name, s, mine)
                    if r:
                        label += f"  ({mine} {r:.2f}x)"
            out.append(f'<text x="{left + max(w, hi * scale) + 6:.1f}" y="{y + bar - 4}">{html.escape(label)}</text>')
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["table", "markdown", "json", "svg"])
    parser.add_argument("raw", nargs="+", type=Path, help="raw measurement files (JSON lines)")
    parser.add_argument("--out", type=Path, help="svg: the folder for the charts")
    args = parser.parse_args()
    benches = load(args.raw)
    if not benches:
        print("report.py: no benchmark in the raw files", file=sys.stderr)
        return 1
    if args.mode in ("table", "markdown"):
        for bench in benches:
            print_table(bench, args.mode == "markdown")
    elif args.mode == "json":
        for bench in benches:
            for row in summary(bench):
                print(json.dumps(row))
    else:
        if args.out is None:
            parser.error("svg needs --out DIR")
        args.out.mkdir(parents=True, exist_ok=True)
        for bench in benches:
            for metric in bench.metrics:
                path = args.out / f"{bench.name}-{metric.name}.svg"
                path.write_text(svg(bench, metric))
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
