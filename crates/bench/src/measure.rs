//! Timing loops. The machine is shared and noisy, so each figure is the fastest of several batches (interference
//! only ever slows a batch down), and every run warms up first.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// How long to spend on each measurement.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub per_measurement: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { per_measurement: Duration::from_millis(300) }
    }
}

/// Seconds per call of `op`, from the fastest batch run within the budget.
pub fn seconds_per_op<T>(budget: Budget, mut op: impl FnMut() -> T) -> f64 {
    black_box(op());
    // Size batches to roughly 10 ms so timer overhead is negligible and there are many batches to pick from.
    let start = Instant::now();
    let mut calibration_ops = 0u64;
    while start.elapsed() < Duration::from_millis(10) || calibration_ops == 0 {
        black_box(op());
        calibration_ops += 1;
    }
    let per_op = start.elapsed().as_secs_f64() / calibration_ops as f64;
    let batch = ((0.01 / per_op).ceil() as u64).max(1);
    let deadline = Instant::now() + budget.per_measurement;
    let mut best = f64::INFINITY;
    let mut batches = 0;
    while Instant::now() < deadline || batches < 3 {
        let t = Instant::now();
        for _ in 0..batch {
            black_box(op());
        }
        best = best.min(t.elapsed().as_secs_f64() / batch as f64);
        batches += 1;
    }
    best
}

/// Megabytes (10^6 bytes) per second for `bytes` processed in `seconds`.
pub fn mb_per_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e6
}
