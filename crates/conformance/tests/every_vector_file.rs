//! The Rust implementation passes every file of spec/vectors (or says why a file does not apply to it), and a
//! case that is wrong is reported as failed, not passed. `LARDER_BLESS=1` first rewrites the encoder-made
//! `entry_hex` values of entries.json, after a deliberate format change (say so in the commit).

use larder_conformance::{entries, run_file, vectors_dir};

#[test]
fn every_vector_file_passes() {
    if std::env::var_os("LARDER_BLESS").is_some() {
        entries::bless(&vectors_dir().join("entries.json")).expect("blessed");
    }
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .expect("spec/vectors")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "{files:?}");
    for file in files {
        let report = run_file(&file);
        assert!(report.status == "pass" || report.status == "not_applicable", "{report:?}");
        assert!(report.status == "not_applicable" || report.cases >= 6, "{report:?}");
        assert!(report.status == "pass" || report.reason.is_some(), "not applicable says why: {report:?}");
    }
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
