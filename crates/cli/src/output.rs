//! Writing to stdout the way command-line tools should: a closed pipe (`larder … | head`) ends output quietly
//! instead of panicking, any other write error is reported, and output meant for people can tell whether a
//! person is reading (a terminal) or a program is.

use std::io::{ErrorKind, IsTerminal, Write};

use crate::Failure;

/// Writes `bytes` to stdout and flushes.
pub fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::input(format!("cannot write to stdout: {e}"))),
    }
}

/// Writes `line` and a newline to stdout.
pub fn print_line(line: &str) -> Result<(), Failure> {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    write_stdout(text.as_bytes())
}

/// Overrides terminal detection (spec/CLI.md): `1` treats stdout as a terminal, `0` as not, so that tests and
/// scripts can see either form whatever stdout is.
pub const FORCE_TTY_VAR: &str = "LARDER_FORCE_TTY";

/// Whether stdout is a terminal, unless [`FORCE_TTY_VAR`] says otherwise.
pub fn stdout_is_terminal() -> bool {
    match std::env::var_os(FORCE_TTY_VAR) {
        Some(value) if value == "1" => true,
        Some(value) if value == "0" => false,
        _ => std::io::stdout().is_terminal(),
    }
}
