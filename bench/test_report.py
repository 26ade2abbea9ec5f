"""Tests of bench/report.py, the one place every benchmark's medians, ratios and target verdicts are computed.

A wrong verdict here would put a false "met" into docs/benchmarks.md, so each rule of the module's docstring is
checked on small raw files whose answers are worked out by hand. Run by `make test-python` (pytest bench/).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from xml.etree import ElementTree

import pytest


def _load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", Path(__file__).with_name("report.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_report"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


report = _load_report()

META = {
    "meta": True, "bench": "peers", "title": "Hits", "command": "bench/peers.sh", "subject": "larder",
    "metrics": [{"name": "rps", "label": "req/s", "better": "higher"},
                {"name": "p99_ms", "label": "p99 ms", "better": "lower"}],
    "targets": [{"case": "10k", "vs": "nginx", "metric": "rps", "ratio": 1.3},
                {"case": "10k", "vs": "nginx", "metric": "p99_ms", "ratio": 1.0, "every_round": True},
                {"case": "*", "vs": "nginx", "metric": "rps", "ratio": 1.0}],
}


def rows(*measurements: tuple[str, str, int, float, float]) -> list[dict[str, object]]:
    return [{"bench": "peers", "case": case, "subject": subject, "round": rnd, "rps": rps, "p99_ms": p99}
            for case, subject, rnd, rps, p99 in measurements]


def write(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def bench_of(tmp_path: Path, measurements: list[dict[str, object]]) -> object:
    (bench,) = report.load([write(tmp_path, [META, *measurements])])
    return bench


def test_medians_and_spread_over_rounds(tmp_path: Path) -> None:
    bench = bench_of(tmp_path, rows(("10k", "nginx", 1, 100, 2), ("10k", "nginx", 2, 300, 4),
                                    ("10k", "nginx", 3, 200, 3)))
    assert bench.median("10k", "nginx", "rps") == 200
    assert bench.spread("10k", "nginx", "rps") == (100, 300)
    assert bench.median("10k", "larder", "rps") is None


def test_a_higher_target_is_a_floor_on_the_ratio_of_medians(tmp_path: Path) -> None:
    bench = bench_of(tmp_path, rows(("10k", "nginx", 1, 100, 2), ("10k", "larder", 1, 130, 1),
                                    ("10k", "nginx", 2, 100, 2), ("10k", "larder", 2, 129.9, 1)))
    rps = [v for v in report.verdicts(bench, "10k") if v.target.metric == "rps" and v.target.ratio == 1.3]
    assert len(rps) == 1
    assert rps[0].ratio == pytest.approx(1.2995)
    assert not rps[0].met
    # A ratio that rounds to the target is printed with enough digits to show why it missed.
    assert "1.2995x MISSED" in rps[0].describe()


def test_a_lower_target_is_a_ceiling_and_every_round_counts_rounds(tmp_path: Path) -> None:
    # larder's median p99 (2.0) is below nginx's (3.0), but round 2 is worse than nginx's round 2.
    bench = bench_of(tmp_path, rows(("10k", "nginx", 1, 100, 3), ("10k", "larder", 1, 200, 1),
                                    ("10k", "nginx", 2, 100, 2), ("10k", "larder", 2, 200, 2.5),
                                    ("10k", "nginx", 3, 100, 4), ("10k", "larder", 3, 200, 2)))
    (p99,) = [v for v in report.verdicts(bench, "10k") if v.target.metric == "p99_ms"]
    assert p99.ratio == pytest.approx(2 / 3)
    assert (p99.rounds_met, p99.rounds) == (2, 3)
    assert not p99.met
    assert "<= 1x nginx" in p99.describe() and "(2/3 rounds)" in p99.describe()


def test_a_wildcard_target_applies_to_every_case(tmp_path: Path) -> None:
    bench = bench_of(tmp_path, rows(("1m", "nginx", 1, 10, 9), ("1m", "larder", 1, 9, 9)))
    (verdict,) = report.verdicts(bench, "1m")
    assert verdict.target.case == "*" and not verdict.met and verdict.ratio == pytest.approx(0.9)


def test_a_measurement_before_its_meta_line_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, [*rows(("10k", "nginx", 1, 100, 2)), META])
    with pytest.raises(SystemExit, match="before its meta line"):
        report.load([path])


def test_a_line_that_is_not_json_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_text(json.dumps(META) + "\n{not json\n")
    with pytest.raises(SystemExit, match=r"raw.jsonl:2: not JSON"):
        report.load([path])


def test_negative_and_missing_values_are_not_measurements(tmp_path: Path) -> None:
    measurements = rows(("10k", "nginx", 1, 100, 2))
    measurements.append({"bench": "peers", "case": "10k", "subject": "nginx", "round": 2, "rps": -1})
    bench = bench_of(tmp_path, measurements)
    assert bench.series("10k", "nginx", "rps") == {1: 100.0}
    assert bench.series("10k", "nginx", "p99_ms") == {1: 2.0}


def test_summary_and_chart(tmp_path: Path) -> None:
    bench = bench_of(tmp_path, rows(("10k", "nginx", 1, 100, 2), ("10k", "larder", 1, 150, 1),
                                    ("10k", "nginx", 2, 120, 4), ("10k", "larder", 2, 160, 3)))
    (nginx,) = [r for r in report.summary(bench) if r["subject"] == "nginx"]
    assert nginx["rps"] == 110 and (nginx["rps_min"], nginx["rps_max"]) == (100, 120)
    assert nginx["larder_rps_ratio"] == pytest.approx(155 / 110)
    assert {t["metric"] for t in nginx["targets"]} == {"rps", "p99_ms"}
    chart = report.svg(bench, bench.metric("rps"))
    root = ElementTree.fromstring(chart)  # well-formed
    assert root.tag.endswith("svg") and "larder" in chart and "nginx" in chart
