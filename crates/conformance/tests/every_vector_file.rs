//! The Rust implementation passes every file of spec/vectors (or says why a file does not apply to it), and a
//! case that is wrong is reported as failed, not passed. `LARDER_BLESS=1` first rewrites the encoder-made
//! `entry_hex` values of entries.json, after a deliberate format change (say so in the commit).
//!
//! The hostile_*.json files get what `spec/conformance.py` gives the runner through the environment: a real
//! memcached and redis-server of this test's own (larder_testkit), and the hostile server of larder_testkit, started
//! in-process with the options `larder-hostile` takes.

use std::time::Duration;

use larder_conformance::outage::FaultControl;
use larder_conformance::{entries, run_file, run_file_with, vectors_dir, Hostile, Servers};
use larder_testkit::faults::{Fault, FaultProxy};
use larder_testkit::hostile::{HostileServer, Settings};
use larder_testkit::{Memcached, Redis};

/// `larder-hostile PROTOCOL BEHAVIOUR [--size N] [--interval-ms N] [--depth N] [--count N]`, in this process.
fn start_hostile(protocol: &str, behaviour: &str, args: &[String]) -> Result<Hostile, String> {
    let mut settings = Settings::default();
    for pair in args.chunks(2) {
        let [flag, value] = pair else { return Err(format!("{flag:?} needs a value", flag = pair[0])) };
        let n: u64 = value.parse().map_err(|_| format!("{flag}: {value:?}"))?;
        match flag.as_str() {
            "--size" => settings.size = n,
            "--interval-ms" => settings.interval = Duration::from_millis(n),
            "--depth" => settings.depth = n as usize,
            "--count" => settings.count = n,
            other => return Err(format!("unknown option {other}")),
        }
    }
    let server = HostileServer::start(protocol.parse()?, behaviour.parse()?, settings).map_err(|e| e.to_string())?;
    Ok(Hostile::new(server.address().to_string(), Box::new(server)))
}

/// A fault proxy of larder_testkit in this process, driven by `larder-faults`'s command lines.
fn start_faults(upstream: &str) -> Result<Box<dyn FaultControl>, String> {
    struct InProcess(FaultProxy);
    impl FaultControl for InProcess {
        fn address(&self) -> String {
            self.0.address().to_string()
        }
        fn command(&mut self, line: &str) -> Result<(), String> {
            self.0.set(line.parse::<Fault>()?).map_err(|e| e.to_string())
        }
    }
    let upstream = upstream.parse().map_err(|e| format!("{upstream}: {e}"))?;
    Ok(Box::new(InProcess(FaultProxy::start(upstream).map_err(|e| e.to_string())?)))
}

#[test]
fn every_vector_file_passes() {
    if std::env::var_os("LARDER_BLESS").is_some() {
        entries::bless(&vectors_dir().join("entries.json")).expect("blessed");
    }
    let memcached = Memcached::start().expect("memcached");
    let redis = Redis::start().expect("redis");
    let servers = Servers {
        memcached: Some(memcached.address()),
        redis: Some(format!("127.0.0.1:{}", redis.port())),
        hostile: Some(Box::new(start_hostile)),
        faults: Some(Box::new(start_faults)),
    };
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .expect("spec/vectors")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 11, "{files:?}");
    for file in files {
        let report = run_file_with(&file, &servers);
        assert!(report.status == "pass" || report.status == "not_applicable", "{report:?}");
        assert!(report.status == "not_applicable" || report.cases >= 6, "{report:?}");
        assert!(report.status == "pass" || report.reason.is_some(), "not applicable says why: {report:?}");
        if report.file.starts_with("hostile_") && report.file != "hostile_pages.json" {
            assert_eq!(report.status, "pass", "{report:?}");
        }
    }
}

#[test]
fn a_file_store_case_whose_expectation_is_wrong_is_reported_as_failed() {
    let dir = tempfile_dir("hostile-files");
    std::fs::copy(vectors_dir().join("hostile_tree.py"), dir.join("hostile_tree.py")).expect("copy the script");
    let text = std::fs::read_to_string(vectors_dir().join("hostile_files.json")).expect("hostile_files.json");
    let mut doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let cases = doc["cases"].as_array_mut().expect("cases");
    let linked = cases.iter_mut().find(|c| c["name"] == "linked_entry").expect("linked_entry");
    // The planted file behind k1's link is of the store's own form: a store that followed it would read a hit.
    linked["operations"][0]["expect"] = "hit".into();
    let wrong = dir.join("hostile_files.json");
    std::fs::write(&wrong, doc.to_string()).expect("write");
    let report = run_file(&wrong);
    assert_eq!((report.status, report.failed.clone()), ("fail", vec!["linked_entry".to_owned()]), "{report:?}");
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("larder-conformance-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

#[test]
fn a_hostile_file_without_its_servers_fails_saying_which_is_missing() {
    let none = Servers { memcached: None, redis: None, hostile: None, faults: None };
    for (file, variable) in
        [("hostile_keys.json", "LARDER_CONFORMANCE_MEMCACHED"), ("hostile_replies.json", "LARDER_HOSTILE")]
    {
        let report = run_file_with(&vectors_dir().join(file), &none);
        assert_eq!(report.status, "fail", "{report:?}");
        assert!(report.reason.as_deref().is_some_and(|r| r.contains(variable)), "{report:?}");
    }
    let pages = run_file(&vectors_dir().join("hostile_pages.json"));
    assert_eq!(pages.status, "not_applicable");
}

#[test]
fn a_wrong_case_is_reported_as_failed_with_its_name() {
    let dir = std::env::temp_dir().join(format!("larder-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let text = std::fs::read_to_string(vectors_dir().join("keys.json")).expect("keys.json");
    let mut doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    doc["safe"][0]["safe"] = "not what safe_key gives".into();
    let wrong = dir.join("keys.json");
    std::fs::write(&wrong, doc.to_string()).expect("write");
    let report = run_file(&wrong);
    assert_eq!(report.status, "fail");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].starts_with("safe/"), "{report:?}");
    let unknown = dir.join("future.json");
    std::fs::write(&unknown, "{}").expect("write");
    assert_eq!(run_file(&unknown).status, "fail", "an unknown file is not a silent pass");
    let _ = std::fs::remove_dir_all(dir);
}
