//! `larder`: the caching reverse proxy, its benchmarks, and tools to encode, inspect and key entries.

mod commands;
mod display;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// larder: a fast, shared, polyglot cache for web applications.
///
/// One entry format (spec/FORMAT.md) spoken by a caching reverse proxy and by client libraries in several
/// languages, over one shared store.
#[derive(Parser)]
#[command(name = "larder", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Bench(commands::bench::BenchArgs),
    Demo(commands::demo::DemoArgs),
    Encode(commands::encode::EncodeArgs),
    Inspect(commands::inspect::InspectArgs),
    Key(commands::key::KeyArgs),
    Serve(Box<commands::serve::ServeArgs>),
    Store(commands::store::StoreArgs),
}

/// Help and version go to stdout as clap prints them; usage errors become one `larder: ` line (spec/CLI.md).
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // clap renders the whole help here (a bare `larder`, `larder bench`); one line names what is missing.
            let rendered = error.render().to_string();
            let command = rendered
                .lines()
                .find_map(|line| line.trim_start().strip_prefix("Usage: "))
                .map(|usage| usage.split_whitespace().take_while(|w| !w.starts_with(['<', '['])).collect::<Vec<_>>())
                .unwrap_or_default();
            match command.get(1..).unwrap_or_default() {
                [] => eprintln!("larder: a subcommand is required (see --help)"),
                path => eprintln!("larder: {} needs a subcommand (see --help)", path.join(" ")),
            }
            return ExitCode::from(2);
        }
        _ => {}
    }
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    let message = first.strip_prefix("error: ").unwrap_or(first);
    // clap lists the values a setting takes on a line of its own; they belong in the one line.
    let values = rendered.lines().find_map(|l| l.trim().strip_prefix("[possible values: ")?.strip_suffix(']'));
    match values {
        Some(values) => eprintln!("larder: {message}: use one of {values} (see --help)"),
        None => eprintln!("larder: {message} (see --help)"),
    }
    ExitCode::from(2)
}

/// A failure with the exit status spec/CLI.md gives it.
#[derive(Debug)]
pub struct Failure {
    pub status: u8,
    pub message: String,
}

impl Failure {
    /// Bad input or usage: exit status 2.
    pub fn input(message: impl Into<String>) -> Self {
        Failure { status: 2, message: message.into() }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure::input(format!("{:#}", anyhow::Error::from(error)))
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(error),
    };
    let result = match cli.command {
        Command::Bench(args) => commands::bench::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Encode(args) => commands::encode::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Key(args) => commands::key::run(args),
        Command::Serve(args) => commands::serve::run(*args),
        Command::Store(args) => commands::store::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("larder: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}
