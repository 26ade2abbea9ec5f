//! What the CLI test files share.

/// Whether `help` shows `values`, in this order, in the part about `option` (from the line that introduces it to
/// the next option's line): what clap writes around them ("[possible values: …]" today) is clap's, not larder's.
pub fn lists_values(help: &str, option: &str, values: &[&str]) -> bool {
    let introduces = |line: &str| {
        let line = line.trim_start();
        line.starts_with('-') && line.split([' ', ',', '=', '<', '[']).any(|word| word == option)
    };
    let part: String = help
        .lines()
        .skip_while(|line| !introduces(line))
        .enumerate()
        .take_while(|(i, line)| *i == 0 || !line.trim_start().starts_with('-'))
        .map(|(_, line)| format!("{line}\n"))
        .collect();
    let mut rest = part.as_str();
    !part.is_empty()
        && values.iter().all(|value| match rest.find(value) {
            Some(at) => {
                rest = &rest[at + value.len()..];
                true
            }
            None => false,
        })
}
