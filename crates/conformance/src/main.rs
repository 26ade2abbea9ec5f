//! `larder-conformance FILE…`: checks each spec/vectors file against the Rust implementation and prints one JSON
//! line per file (spec/vectors/README.md, "Conformance runners"). Exit status 0 whenever the files could be judged.
//! `larder-conformance --answer FILE`: prints a storage.json-shaped file back with every `expected` filled in by the
//! Rust rules (for spec/storage_differential.py).

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "--answer") {
        return answer(args.get(1).map(PathBuf::from));
    }
    let files: Vec<PathBuf> = args.into_iter().map(PathBuf::from).collect();
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

fn answer(path: Option<PathBuf>) -> std::process::ExitCode {
    let Some(path) = path else {
        eprintln!("usage: larder-conformance --answer FILE (a storage.json-shaped file)");
        return std::process::ExitCode::from(2);
    };
    let answered = larder_conformance::load(&path).and_then(|mut file| {
        larder_conformance::storage::answer(&mut file)?;
        serde_json::to_string(&file).map_err(|e| e.to_string())
    });
    match answered {
        Ok(text) => {
            println!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("larder-conformance: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
