//! `larder bench …`: benchmarks that print figures (tables on a terminal, JSON lines with --json).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use larder_bench::codecs::{targets, CodecBench, Row};
use larder_bench::hit_ratio;
use larder_bench::measure::Budget;
use larder_bench::memory::{self, Contender, MemoryFigures};
use larder_bench::policies::Reference;
use larder_bench::progress;
use larder_bench::trace::{self, TraceFormat};

use crate::output::{print_line, write_stdout};
use crate::Failure;

/// Run a benchmark and print its figures.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand)]
enum Which {
    Codecs(CodecsArgs),
    HitRatio(HitRatioArgs),
    Memory(MemoryArgs),
    Stores(super::bench_stores::StoresArgs),
}

/// Fill an in-process cache with N entries and measure memory and speed, for larder, moka and quick_cache.
///
/// Keys are "1".."N" and every value is the same ~200-byte MessagePack record, as in the source post (004).
/// Each cache runs in its own child process so resident memory is measured cleanly.
#[derive(Args)]
struct MemoryArgs {
    /// Number of entries.
    #[arg(long, default_value_t = 1_000_000)]
    entries: usize,
    /// Print one JSON object per cache.
    #[arg(long)]
    json: bool,
    /// Milliseconds for each timed phase (gets, mixes).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    time_ms: u64,
    /// Measure only this cache, in this process (used internally).
    #[arg(long, hide = true)]
    only: Option<String>,
}

/// Replay a cache trace through the memory store and an exact LRU; print both hit ratios and miss counts.
///
/// Give a public trace with --trace and --format (ARC's OLTP and P3, LIRS's, cache2k's, libCacheSim's oracleGeneral
/// files; see docs/benchmarks.md for where each comes from), or --zipf for a synthetic one made here: --requests
/// requests over --keys keys, Zipf-distributed with that exponent, from a fixed seed. Unsized traces (arc, lirs,
/// cache2k, zipf) bound the store by entry count; traces that carry object sizes (oracle-general) bound it by
/// bytes, counting object sizes as simulators do, and report the byte hit ratio (the share of requested bytes
/// served) beside the request hit ratio. Files ending in .zst, .gz or .xz are decompressed.
#[derive(Args)]
struct HitRatioArgs {
    /// The trace file.
    #[arg(long, value_name = "FILE", requires = "format", required_unless_present = "zipf")]
    trace: Option<PathBuf>,
    /// The trace's format.
    #[arg(long, value_parser = ["arc", "lirs", "cache2k", "oracle-general"])]
    format: Option<String>,
    /// A synthetic Zipf trace with this exponent instead of a file (0.99 is a typical web skew).
    #[arg(long, value_name = "EXPONENT", conflicts_with = "trace")]
    zipf: Option<f64>,
    /// With --zipf: distinct keys.
    #[arg(long, default_value_t = 100_000, requires = "zipf")]
    keys: usize,
    /// With --zipf: requests.
    #[arg(long, default_value_t = 1_000_000, requires = "zipf")]
    requests: usize,
    /// Capacities to try, comma-separated (entries, or bytes for sized traces; K, M and G suffixes are powers of
    /// 1024).
    #[arg(long, value_delimiter = ',', required = true, value_name = "N[,N...]", value_parser = parse_capacity)]
    capacity: Vec<usize>,
    /// Shards in the store (default: what the store picks for the capacity, as in service).
    #[arg(long, value_name = "N")]
    shards: Option<usize>,
    /// Sized traces: charge entries what the store charges in service (key, value and bookkeeping) rather than
    /// the object size alone.
    #[arg(long)]
    charge_bookkeeping: bool,
    /// Published miss counts to compare with, one per capacity in order, e.g. ARC=90252,85861,... (repeatable).
    #[arg(long = "reference", value_name = "NAME=MISSES[,MISSES...]", value_parser = parse_reference)]
    references: Vec<(String, Vec<u64>)>,
    /// Reference policies replayed beside larder, comma-separated: lru (always shown), arc, s3fifo, sieve; or none.
    /// Each follows libCacheSim's implementation and is byte-aware on sized traces.
    #[arg(long, value_delimiter = ',', default_value = "lru,arc,s3fifo,sieve", value_name = "P[,P...]")]
    policies: Vec<String>,
    /// Append one measurement per policy and capacity to this file in bench/report.py's raw format (bench
    /// "hit-ratio", metric "misses", case "trace@capacity").
    #[arg(long, value_name = "FILE")]
    raw: Option<PathBuf>,
    /// Print one JSON object per capacity.
    #[arg(long)]
    json: bool,
}

/// The reference policies named by --policies (lru is always replayed, so it adds nothing).
fn parse_policies(names: &[String]) -> Result<Vec<Reference>, String> {
    let mut chosen = Vec::new();
    for name in names.iter().map(|n| n.trim().to_ascii_lowercase()) {
        if name == "lru" || name == "none" || name.is_empty() {
            continue;
        }
        let reference: Reference = name.parse()?;
        if !chosen.contains(&reference) {
            chosen.push(reference);
        }
    }
    Ok(chosen)
}

fn parse_capacity(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.trim().char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&text[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?} is not a capacity (a positive number, optionally with K, M or G)"))
}

fn parse_reference(text: &str) -> Result<(String, Vec<u64>), String> {
    let (name, counts) = text.split_once('=').ok_or_else(|| format!("{text:?}: expected NAME=MISSES,MISSES,..."))?;
    let counts = counts
        .split(',')
        .map(|c| c.trim().parse::<u64>().map_err(|e| format!("{text:?}: miss count {c:?}: {e}")))
        .collect::<Result<Vec<u64>, String>>()?;
    Ok((name.trim().to_owned(), counts))
}

/// Compare compressors, serializers and the whole entry envelope.
///
/// Runs on built-in, deterministic data (a ~1 MB product-listing HTML page and 4,000 user records as
/// MessagePack) and on every --input file. Each figure is the fastest of several batches on one core.
#[derive(Args)]
struct CodecsArgs {
    /// Also measure this file (JSON files also get serializer rows); repeatable.
    #[arg(long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Print one JSON object per row instead of tables.
    #[arg(long)]
    json: bool,
    /// Milliseconds to spend on each measurement.
    #[arg(long, default_value_t = 300, value_name = "MS")]
    time_ms: u64,
}

pub fn run(args: BenchArgs) -> Result<(), Failure> {
    match args.which {
        Which::Codecs(args) => codecs(args),
        Which::HitRatio(args) => hit_ratio(args),
        Which::Memory(args) => memory_bench(args),
        Which::Stores(args) => super::bench_stores::run(args),
    }
}

fn codecs(args: CodecsArgs) -> Result<(), Failure> {
    let bench =
        CodecBench { inputs: args.inputs, budget: Budget { per_measurement: Duration::from_millis(args.time_ms) } };
    let bar = progress::bar(bench.steps(), !args.json);
    let rows = bench
        .run(|label| {
            bar.set_message(label.to_owned());
            bar.inc(1);
        })
        .map_err(Failure::input)?;
    bar.finish_and_clear();
    if args.json {
        for row in &rows {
            print_line(&serde_json::to_string(row)?)?;
        }
        return Ok(());
    }
    let mut text = tables(&rows);
    text.push_str("\nTargets (one core):\n");
    for (what, measured, met) in targets(&rows) {
        let _ = writeln!(text, "  [{}] {what}: {measured}", if met { "met" } else { "NOT met" });
    }
    write_stdout(text.as_bytes())
}

fn hit_ratio(args: HitRatioArgs) -> Result<(), Failure> {
    let (name, requests) = match (&args.trace, args.zipf) {
        (Some(path), _) => {
            let format: TraceFormat = args.format.as_deref().unwrap_or_default().parse().map_err(Failure::input)?;
            let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
            (name, trace::load(path, format).map_err(Failure::input)?)
        }
        (None, Some(exponent)) if exponent > 0.0 && exponent.is_finite() && args.keys > 0 => {
            (format!("zipf {exponent} over {} keys", args.keys), trace::zipf(args.keys, args.requests, exponent))
        }
        (None, Some(exponent)) => {
            return Err(Failure::input(format!("--zipf {exponent}: give a positive exponent and --keys of 1 or more")))
        }
        (None, None) => return Err(Failure::input("give --trace FILE --format F, or --zipf EXPONENT")),
    };
    for (label, counts) in &args.references {
        if counts.len() != args.capacity.len() {
            return Err(Failure::input(format!(
                "--reference {label}: {} miss counts for {} capacities",
                counts.len(),
                args.capacity.len()
            )));
        }
    }
    let references = parse_policies(&args.policies).map_err(Failure::input)?;
    let options =
        hit_ratio::ReplayOptions { shards: args.shards, charge_bookkeeping: args.charge_bookkeeping, references };
    let bar = progress::bar(args.capacity.len() as u64, !args.json);
    let mut rows = Vec::new();
    for &capacity in &args.capacity {
        bar.set_message(format!("capacity {capacity}"));
        let row = hit_ratio::replay_with(&name, &requests, capacity, options.clone()).map_err(Failure::input)?;
        bar.inc(1);
        if args.json {
            print_line(&serde_json::to_string(&row)?)?;
        }
        rows.push(row);
    }
    bar.finish_and_clear();
    if let Some(path) = &args.raw {
        larder_bench::hit_ratio_raw::append(path, &rows).map_err(Failure::input)?;
    }
    if !args.json {
        write_stdout(hit_ratio_table(&name, requests.len(), &rows, &args.references).as_bytes())?;
    }
    Ok(())
}

/// Request hit ratios for every trace; byte hit ratios and miss counts too for sized ones; then each reference's
/// misses against larder's.
fn hit_ratio_table(
    name: &str,
    requests: usize,
    rows: &[hit_ratio::HitRatioRow],
    refs: &[(String, Vec<u64>)],
) -> String {
    let sized = rows.first().is_some_and(|r| r.requested_bytes.is_some());
    let mut text = format!("{name}: {requests} requests");
    if let Some(bytes) = rows.first().and_then(|r| r.requested_bytes) {
        let _ = write!(text, ", {bytes} bytes requested");
    }
    text.push('\n');
    let _ = write!(text, "{:>12} {:>6} {:>9} {:>9} {:>7}", "capacity", "shards", "larder", "LRU", "delta");
    if sized {
        let _ = write!(text, " {:>11} {:>11}", "larder byte", "LRU byte");
    }
    let _ = write!(text, " {:>9} {:>9}", "misses", "LRU miss");
    let policies: Vec<&str> = rows.first().map(|r| r.references.iter().map(|p| p.policy).collect()).unwrap_or_default();
    for policy in &policies {
        let _ = write!(text, " {:>9} {:>11}", format!("{policy}%"), format!("{policy} miss"));
    }
    if !policies.is_empty() {
        let _ = write!(text, " {:>10}", "larder-best");
    }
    for (label, _) in refs {
        let _ = write!(text, " {:>9} {:>9}", format!("{label} miss"), "larder-it");
    }
    text.push('\n');
    for (i, row) in rows.iter().enumerate() {
        let _ = write!(
            text,
            "{:>12} {:>6} {:>8.2}% {:>8.2}% {:>+7.2}",
            row.capacity,
            row.shards,
            100.0 * row.larder_hit_ratio,
            100.0 * row.lru_hit_ratio,
            100.0 * (row.larder_hit_ratio - row.lru_hit_ratio)
        );
        if let (Some(l), Some(r)) = (row.larder_byte_hit_ratio, row.lru_byte_hit_ratio) {
            let _ = write!(text, " {:>10.2}% {:>10.2}%", 100.0 * l, 100.0 * r);
        }
        let _ = write!(text, " {:>9} {:>9}", row.larder_misses, row.lru_misses);
        for policy in &row.references {
            let _ = write!(text, " {:>8.2}% {:>11}", 100.0 * policy.hit_ratio, policy.misses);
        }
        if let Some(best) = row.references.iter().map(|p| p.misses).min() {
            let _ = write!(text, " {:>+10}", row.larder_misses as i64 - best as i64);
        }
        for (_, counts) in refs {
            let theirs = counts[i];
            let _ = write!(text, " {:>9} {:>+9}", theirs, row.larder_misses as i64 - theirs as i64);
        }
        text.push('\n');
    }
    if rows.first().is_some_and(|r| !r.references.is_empty()) {
        text.push_str("(larder-best: larder's misses minus the fewest of the reference policies'; LRU's excluded)\n");
    }
    if !refs.is_empty() {
        text.push_str("(larder-it: larder's misses minus the reference's; negative is fewer misses)\n");
    }
    text
}

fn memory_bench(args: MemoryArgs) -> Result<(), Failure> {
    let phase = Duration::from_millis(args.time_ms);
    if let Some(only) = &args.only {
        let contender: Contender = only.parse().map_err(Failure::input)?;
        let figures = memory::measure(contender, args.entries, phase).map_err(Failure::input)?;
        return print_line(&serde_json::to_string(&figures)?);
    }
    let exe = std::env::current_exe().map_err(|e| Failure::input(format!("cannot find the larder binary: {e}")))?;
    let bar = progress::bar(Contender::ALL.len() as u64, !args.json);
    let mut all = Vec::new();
    for contender in Contender::ALL {
        bar.set_message(contender.name());
        let output = std::process::Command::new(&exe)
            .args(["bench", "memory", "--only", contender.name()])
            .args(["--entries", &args.entries.to_string(), "--time-ms", &args.time_ms.to_string()])
            .output()
            .map_err(|e| Failure::input(format!("cannot run {}: {e}", exe.display())))?;
        if !output.status.success() {
            return Err(Failure::input(format!(
                "{} run failed: {}",
                contender.name(),
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let figures: MemoryFigures = serde_json::from_slice(&output.stdout)?;
        bar.inc(1);
        all.push(figures);
    }
    bar.finish_and_clear();
    if args.json {
        for figures in &all {
            print_line(&serde_json::to_string(figures)?)?;
        }
        return Ok(());
    }
    write_stdout(memory_table(&all).as_bytes())
}

fn memory_table(all: &[MemoryFigures]) -> String {
    let mut out = String::new();
    let Some(first) = all.first() else { return out };
    let _ = writeln!(
        out,
        "{} entries, keys {} bytes in all, values {} bytes each\n",
        first.entries, first.key_bytes, first.value_bytes
    );
    let _ = write!(out, "{:<34}", "");
    for f in all {
        let _ = write!(out, "{:>14}", f.contender.name());
    }
    let _ = writeln!(out, "{:>14}", "larder/moka");
    type Metric = (&'static str, fn(&MemoryFigures) -> f64, bool);
    let metrics: [Metric; 7] = [
        ("resident memory growth (MB)", |f| f.rss_growth_bytes as f64 / 1e6, false),
        ("bookkeeping bytes per entry", |f| f.bookkeeping_per_entry, false),
        ("inserts/s, 1 thread", |f| f.inserts_per_s, true),
        ("gets/s, 1 thread (uniform)", |f| f.gets_per_s_1_thread, true),
        ("gets/s, 2 threads (uniform)", |f| f.gets_per_s_2_threads, true),
        ("gets/s, 2 threads (zipf 0.99)", |f| f.zipf_gets_per_s_2_threads, true),
        ("90/10 get/set ops/s, 2 threads", |f| f.mix_90_10_ops_per_s_2_threads, true),
    ];
    let moka = all.iter().find(|f| f.contender == Contender::Moka);
    let larder = all.iter().find(|f| f.contender == Contender::Larder);
    for (label, get, higher_is_better) in metrics {
        let _ = write!(out, "{label:<34}");
        for f in all {
            let v = get(f);
            let _ = if v >= 1e5 { write!(out, "{:>14.2}M", v / 1e6) } else { write!(out, "{v:>15.1}") };
        }
        if let (Some(l), Some(m)) = (larder, moka) {
            let ratio = if higher_is_better { get(l) / get(m) } else { get(m) / get(l) };
            let _ = write!(out, "{:>13.2}x", ratio);
        }
        out.push('\n');
    }
    out.push_str("\n(larder/moka: how many times better larder is; for memory rows, moka's figure over larder's)\n");
    out
}

fn tables(rows: &[Row]) -> String {
    let mut out = String::new();
    let fmt = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.0}"));
    let _ = writeln!(out, "Compressors (MB/s of uncompressed data)");
    let _ = writeln!(
        out,
        "{:<20} {:<10} {:>10} {:>10} {:>7} {:>12} {:>12}",
        "data", "compressor", "input", "output", "ratio", "compress", "decompress"
    );
    for r in rows.iter().filter(|r| r.kind == "compressor") {
        let _ = writeln!(
            out,
            "{:<20} {:<10} {:>10} {:>10} {:>7.2} {:>12} {:>12}",
            r.data,
            r.name,
            r.input_bytes,
            r.output_bytes,
            r.input_bytes as f64 / r.output_bytes.max(1) as f64,
            fmt(r.compress_mb_s),
            fmt(r.decompress_mb_s)
        );
    }
    let _ = writeln!(out, "\nSerializers (MB/s of serialized data)");
    let _ = writeln!(out, "{:<20} {:<10} {:>10} {:>12} {:>12}", "data", "serializer", "bytes", "encode", "decode");
    for r in rows.iter().filter(|r| r.kind == "serializer") {
        let _ = writeln!(
            out,
            "{:<20} {:<10} {:>10} {:>12} {:>12}",
            r.data,
            r.name,
            r.output_bytes,
            fmt(r.encode_mb_s),
            fmt(r.decode_mb_s)
        );
    }
    let _ = writeln!(out, "\nWhole envelope (encode + decode of one entry)");
    let _ = writeln!(out, "{:<20} {:<12} {:>10} {:>10} {:>14}", "data", "options", "value", "entry", "entries/s");
    for r in rows.iter().filter(|r| r.kind == "envelope") {
        let _ = writeln!(
            out,
            "{:<20} {:<12} {:>10} {:>10} {:>14}",
            r.data,
            r.name,
            r.input_bytes,
            r.output_bytes,
            fmt(r.entries_per_s)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_capacity("1000"), Ok(1000));
        assert_eq!(parse_capacity("128M"), Ok(128 << 20));
        assert_eq!(parse_capacity("1g"), Ok(1 << 30));
        assert_eq!(parse_capacity("4K"), Ok(4096));
        for bad in ["", "M", "0", "-1", "1.5G", "12X", "99999999999999999999G"] {
            assert!(parse_capacity(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn references_name_one_miss_count_per_capacity() {
        assert_eq!(parse_reference("ARC=3,2,1"), Ok(("ARC".to_owned(), vec![3, 2, 1])));
        assert!(parse_reference("ARC").is_err());
        assert!(parse_reference("ARC=1,x").is_err());
    }
}
