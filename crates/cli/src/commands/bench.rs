//! `larder bench …`: benchmarks that print figures (tables on a terminal, JSON lines with --json).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use larder_bench::codecs::{targets, CodecBench, Row};
use larder_bench::measure::Budget;
use larder_bench::progress;

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
