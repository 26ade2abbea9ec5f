//! Writing to stdout the way command-line tools should: a closed pipe (`larder … | head`) ends output quietly
//! instead of panicking, and any other write error is reported.

use std::io::{ErrorKind, Write};

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
