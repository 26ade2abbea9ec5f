//! `larder-conformance FILE…`: checks each spec/vectors file against the Rust implementation and prints one JSON
//! line per file (spec/vectors/README.md, "Conformance runners"). Exit status 0 whenever the files could be judged.

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        eprintln!("usage: larder-conformance FILE… (files of spec/vectors)");
        return std::process::ExitCode::from(2);
    }
    // Each case's failure is reported in the JSON; the default hook would print every panic too.
    std::panic::set_hook(Box::new(|_| {}));
    for file in files {
        let report = larder_conformance::run_file(&file);
        match serde_json::to_string(&report) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("larder-conformance: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
