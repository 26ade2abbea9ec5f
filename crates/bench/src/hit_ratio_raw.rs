//! `larder bench hit-ratio --raw FILE`: appends the replay's miss counts to a raw file in bench/report.py's format
//! (one meta line, then one line per policy and capacity), so that report.py tables and charts them beside every
//! other benchmark. Bench "hit-ratio", metric "misses" (lower is better), subjects larder, lru and the reference
//! policies, case "trace@capacity". Each invocation appends its own meta line; report.py keeps the last one.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::hit_ratio::HitRatioRow;

/// Appends `rows` (one trace's capacities) to `path`, creating it if need be.
pub fn append(path: &Path, rows: &[HitRatioRow]) -> Result<(), String> {
    let mut text = String::new();
    let subjects: Vec<&str> = rows.first().map(|r| r.references.iter().map(|p| p.policy).collect()).unwrap_or_default();
    let targets: Vec<_> = std::iter::once("lru")
        .chain(subjects.iter().copied())
        .map(|vs| json!({"case": "*", "vs": vs, "metric": "misses", "ratio": 1.0}))
        .collect();
    let meta = json!({
        "meta": true,
        "bench": "hit-ratio",
        "title": "Eviction: misses per trace and capacity (larder's memory store against exact LRU, ARC, S3-FIFO \
                  and SIEVE replayed in the same harness)",
        "command": "larder bench hit-ratio --trace FILE --format F --capacity N,... --raw FILE",
        "setup": "one replay per trace and capacity; miss counts do not depend on load. Sized traces count object \
                  bytes, unsized ones entries.",
        "date": today(),
        "subject": "larder",
        "metrics": [
            {"name": "misses", "label": "misses", "better": "lower"},
            {"name": "hit_ratio", "label": "hit ratio %", "better": "higher"}
        ],
        "targets": targets,
    });
    text.push_str(&meta.to_string());
    text.push('\n');
    for row in rows {
        let case = format!("{}@{}", row.trace, capacity_label(row.capacity, row.capacity_unit));
        let mut line = |subject: &str, misses: u64, hit_ratio: f64| {
            let measurement = json!({
                "bench": "hit-ratio", "case": case, "subject": subject, "round": 1,
                "misses": misses, "hit_ratio": 100.0 * hit_ratio,
            });
            text.push_str(&measurement.to_string());
            text.push('\n');
        };
        line("larder", row.larder_misses, row.larder_hit_ratio);
        line("lru", row.lru_misses, row.lru_hit_ratio);
        for policy in &row.references {
            line(policy.policy, policy.misses, policy.hit_ratio);
        }
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Bytes as K/M/G when they are whole multiples of 1024, as `--capacity` takes them; entries as they are.
fn capacity_label(capacity: usize, unit: &str) -> String {
    if unit != "bytes" {
        return capacity.to_string();
    }
    for (suffix, size) in [("G", 1usize << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if capacity.is_multiple_of(size) {
            return format!("{}{suffix}", capacity / size);
        }
    }
    capacity.to_string()
}

/// Today's date in UTC, YYYY-MM-DD (civil-from-days, Howard Hinnant's algorithm), without a date crate.
fn today() -> String {
    let days = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hit_ratio::{replay_with, ReplayOptions};
    use crate::policies::Reference;
    use crate::trace::Request;

    #[test]
    fn appends_a_meta_line_and_one_line_per_subject_and_capacity() {
        let trace: Vec<Request> = (0..300).map(|i| Request { key: i % 7, size: None }).collect();
        let options = ReplayOptions { references: Reference::ALL.to_vec(), ..ReplayOptions::default() };
        let rows: Vec<HitRatioRow> =
            [100, 200].iter().map(|&c| replay_with("t", &trace, c, options.clone()).expect("replays")).collect();
        let dir = std::env::temp_dir().join(format!("larder-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("raw.jsonl");
        append(&path, &rows).expect("appends");
        append(&path, &rows[..1]).expect("appends again");
        let text = std::fs::read_to_string(&path).expect("reads");
        std::fs::remove_dir_all(&dir).expect("cleans up");
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
        assert_eq!(lines.len(), 1 + 2 * 5 + 1 + 5);
        assert_eq!(lines[0]["meta"], true);
        assert_eq!(lines[0]["metrics"][0]["better"], "lower");
        assert_eq!(lines[1]["case"], "t@100");
        assert_eq!(lines[1]["subject"], "larder");
        assert_eq!(lines[2]["subject"], "lru");
        assert_eq!(lines[5]["subject"], "sieve");
        assert_eq!(lines[5]["misses"], 7);
        assert_eq!(capacity_label(256 << 20, "bytes"), "256M");
        assert_eq!(capacity_label(1 << 30, "bytes"), "1G");
        assert_eq!(today().len(), 10);
    }
}
