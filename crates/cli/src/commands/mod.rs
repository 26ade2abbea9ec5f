//! One module per `larder` subcommand.

pub mod bench;
pub mod bench_stores;
pub mod demo;
pub mod encode;
pub mod inspect;
pub mod key;
pub mod serve;
pub mod store;

use std::io::Read;

use crate::Failure;

/// All of stdin, or a clear failure.
pub fn read_stdin() -> Result<Vec<u8>, Failure> {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).map_err(|e| Failure::input(format!("cannot read stdin: {e}")))?;
    Ok(input)
}
