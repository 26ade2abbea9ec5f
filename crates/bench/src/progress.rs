//! A progress bar on a terminal, nothing otherwise (JSON output and pipes stay clean).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` steps, drawn on stderr only when it is a terminal and `enabled`.
pub fn bar(total: u64, enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar
}
