//! Benchmarks behind `larder bench …`: each measures real larder code paths on deterministic data and returns rows
//! that the CLI prints as a table or as JSON lines.

pub mod codecs;
pub mod data;
pub mod hit_ratio;
pub mod hit_ratio_raw;
pub mod measure;
pub mod memory;
pub mod policies;
pub mod progress;
pub mod trace;
