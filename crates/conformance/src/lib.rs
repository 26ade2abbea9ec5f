//! The Rust column of the conformance matrix (spec/vectors/README.md, "Conformance runners"): one function per
//! vector file that checks every case against the Rust implementation, used both by `larder-conformance FILE` (which
//! `make conformance` runs beside the Python and Ruby runners) and by this crate's tests, so the matrix and the
//! Rust suite cannot disagree. A case is checked by code that panics on the first difference; the runner catches
//! each case's panic and reports its message, so one bad case never hides the others.

pub mod entries;
pub mod hostile_files;
pub mod hostile_keys;
pub mod hostile_replies;
pub mod invalid;
pub mod keys;
pub mod outage;
pub mod ring;
pub mod storage;
pub mod stores;

use std::io::{BufRead, BufReader, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde::Serialize;
use serde_json::Value;

/// What one language found in one vector file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub language: &'static str,
    pub file: String,
    /// `pass`, `fail` or `not_applicable`.
    pub status: &'static str,
    pub cases: usize,
    /// Names of the failed cases (at most 20).
    pub failed: Vec<String>,
    /// Why not applicable, or what the first failure got.
    pub reason: Option<String>,
}

/// The files of `spec/vectors` in this repository.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors")
}

/// Reads a vector file as JSON.
pub fn load(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
}

/// A running hostile server (its address), stopped when dropped.
pub struct Hostile {
    pub address: String,
    _guard: Box<dyn Send>,
}

impl Hostile {
    pub fn new(address: String, guard: Box<dyn Send>) -> Hostile {
        Hostile { address, _guard: guard }
    }
}

/// Starts a hostile server for `protocol`, `behaviour` and `larder-hostile`'s options (`--size N`, …).
pub type StartHostile = dyn Fn(&str, &str, &[String]) -> Result<Hostile, String> + Send + Sync;

/// What the hostile_*.json files need besides the file (spec/vectors/README.md): real servers the runner may flush,
/// and a way to start hostile ones.
pub struct Servers {
    /// `127.0.0.1:PORT` of a memcached (`LARDER_CONFORMANCE_MEMCACHED`).
    pub memcached: Option<String>,
    /// `127.0.0.1:PORT` of a redis-server (`LARDER_CONFORMANCE_REDIS`).
    pub redis: Option<String>,
    /// How to start `larder-hostile` (`LARDER_HOSTILE`, the binary; the crate's tests start it in-process).
    pub hostile: Option<Box<StartHostile>>,
    /// How to start a fault proxy (`LARDER_FAULTS`, the `larder-faults` binary; the crate's tests start it
    /// in-process).
    pub faults: Option<Box<outage::StartFaults>>,
}

impl Servers {
    /// From the environment `spec/conformance.py` sets.
    pub fn from_env() -> Servers {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Servers {
            memcached: var("LARDER_CONFORMANCE_MEMCACHED"),
            redis: var("LARDER_CONFORMANCE_REDIS"),
            hostile: var("LARDER_HOSTILE").map(|binary| {
                Box::new(move |protocol: &str, behaviour: &str, args: &[String]| {
                    spawn_hostile(&binary, protocol, behaviour, args)
                }) as Box<StartHostile>
            }),
            faults: var("LARDER_FAULTS").map(|binary| {
                Box::new(move |upstream: &str| spawn_faults(&binary, upstream)) as Box<outage::StartFaults>
            }),
        }
    }
}

/// The `larder-hostile` binary's server: it prints its address, and serves until its standard input closes.
fn spawn_hostile(binary: &str, protocol: &str, behaviour: &str, args: &[String]) -> Result<Hostile, String> {
    struct Running(Child, Option<ChildStdin>);
    impl Drop for Running {
        fn drop(&mut self) {
            drop(self.1.take());
            if self.0.try_wait().ok().flatten().is_none() {
                let _ = self.0.kill();
            }
            let _ = self.0.wait();
        }
    }
    let mut child = Command::new(binary)
        .arg(protocol)
        .arg(behaviour)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start LARDER_HOSTILE={binary}: {e}"))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let running = Running(child, stdin);
    let mut line = String::new();
    if let Some(stdout) = stdout {
        BufReader::new(stdout).read_line(&mut line).map_err(|e| format!("{binary}: {e}"))?;
    }
    let address = line.trim().to_owned();
    if address.is_empty() {
        return Err(format!("{binary} {protocol} {behaviour} printed no address"));
    }
    Ok(Hostile::new(address, Box::new(running)))
}

/// The `larder-faults` binary in front of `upstream`: it prints its address, then answers each command line.
fn spawn_faults(binary: &str, upstream: &str) -> Result<Box<dyn outage::FaultControl>, String> {
    struct Running {
        child: Child,
        stdin: Option<ChildStdin>,
        stdout: BufReader<std::process::ChildStdout>,
        address: String,
    }
    impl outage::FaultControl for Running {
        fn address(&self) -> String {
            self.address.clone()
        }
        fn command(&mut self, line: &str) -> Result<(), String> {
            let stdin = self.stdin.as_mut().ok_or("larder-faults has no input")?;
            writeln!(stdin, "{line}").and_then(|()| stdin.flush()).map_err(|e| format!("larder-faults: {e}"))?;
            let mut answer = String::new();
            self.stdout.read_line(&mut answer).map_err(|e| format!("larder-faults: {e}"))?;
            match answer.trim() {
                "ok" => Ok(()),
                other => Err(format!("larder-faults {line:?}: {other:?}")),
            }
        }
    }
    impl Drop for Running {
        fn drop(&mut self) {
            drop(self.stdin.take());
            if self.child.try_wait().ok().flatten().is_none() {
                let _ = self.child.kill();
            }
            let _ = self.child.wait();
        }
    }
    let mut child = Command::new(binary)
        .arg(upstream)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start LARDER_FAULTS={binary}: {e}"))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().ok_or("larder-faults has no output")?;
    let mut running = Running { child, stdin, stdout: BufReader::new(stdout), address: String::new() };
    let mut line = String::new();
    running.stdout.read_line(&mut line).map_err(|e| format!("{binary}: {e}"))?;
    running.address = line.trim().to_owned();
    if running.address.is_empty() {
        return Err(format!("{binary} {upstream} printed no address"));
    }
    Ok(Box::new(running))
}

/// Checks every case of the vector file at `path`, with the servers the environment names.
pub fn run_file(path: &Path) -> Report {
    run_file_with(path, &Servers::from_env())
}

/// Checks every case of the vector file at `path`, with `servers` for the hostile_*.json files.
pub fn run_file_with(path: &Path, servers: &Servers) -> Report {
    let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let report =
        |status, cases, failed, reason| Report { language: "rust", file: file.clone(), status, cases, failed, reason };
    let results = match file.as_str() {
        "signed.json" => {
            return report(
                "not_applicable",
                0,
                Vec::new(),
                Some("Rust never reads pickle or Marshal values (ext 80/101 stay opaque), so it neither signs nor verifies them; the admin API refuses them".into()),
            )
        }
        "entries.json" => entries::check(path),
        "invalid.json" => invalid::check(path),
        "keys.json" => keys::check(path),
        "ring.json" => ring::check(path),
        "stores.json" => stores::check(path),
        "storage.json" => storage::check(path),
        "hostile_keys.json" => hostile_keys::check(path, servers),
        "hostile_files.json" => hostile_files::check(path),
        "hostile_replies.json" => hostile_replies::check(path, servers),
        "outage.json" => outage::check(path, servers),
        "hostile_pages.json" => {
            return report(
                "not_applicable",
                0,
                Vec::new(),
                Some("Rust has no page cache inside an app: pages are cached by the front, which applies its own Host rules (crates/proxy; spec/HTTP.md §2)".into()),
            )
        }
        other => Err(format!("{other} is not a vector file this runner knows: add it to crates/conformance")),
    };
    match results {
        Err(reason) => report("fail", 0, Vec::new(), Some(reason)),
        Ok(results) => {
            let failures: Vec<&CaseResult> = results.iter().filter(|(_, r)| r.is_err()).collect();
            let reason = failures.first().and_then(|(name, r)| r.as_ref().err().map(|e| format!("{name}: {e}")));
            let failed = failures.iter().take(20).map(|(name, _)| name.clone()).collect();
            let status = if failures.is_empty() { "pass" } else { "fail" };
            report(status, results.len(), failed, reason)
        }
    }
}

/// Each case's name and outcome (the message of its first difference), or why the file could not be read.
pub type Checked = Result<Vec<CaseResult>, String>;
pub type CaseResult = (String, Result<(), String>);

/// Runs `check` on every case (a JSON value with a `name`), catching its panic as the case's failure.
pub(crate) fn each(cases: &[Value], check: impl Fn(&Value)) -> Vec<CaseResult> {
    cases
        .iter()
        .map(|case| {
            let name = case["name"].as_str().unwrap_or("(unnamed)").to_owned();
            let result = catch_unwind(AssertUnwindSafe(|| check(case))).map_err(|panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".into())
            });
            (name, result)
        })
        .collect()
}

/// The `cases` list of a vector file.
pub(crate) fn cases(doc: &Value) -> Result<&Vec<Value>, String> {
    doc["cases"].as_array().ok_or_else(|| "the file has no list of cases".to_owned())
}

pub(crate) fn str_field<'a>(v: &'a Value, name: &str) -> &'a str {
    v[name].as_str().unwrap_or_else(|| panic!("field {name} is a string in {v}"))
}

pub(crate) fn u64_field(v: &Value, name: &str) -> u64 {
    v[name].as_u64().unwrap_or_else(|| panic!("field {name} is an integer in {v}"))
}

/// A runtime for a file's store calls (the stores are async).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))
}

/// The `entry_hex` of a hostile_*.json file, as bytes.
pub(crate) fn entry_bytes(doc: &Value) -> Result<Vec<u8>, String> {
    let text = doc["entry_hex"].as_str().ok_or("the file has no entry_hex")?;
    hex::decode(text).map_err(|e| format!("entry_hex: {e}"))
}
