//! The admin API's bearer token, from the configuration or from a file (`admin_token_file`,
//! `--admin-token-file`). A token given as a flag shows in `/proc/PID/cmdline` and `ps` to every local user, and
//! one in the environment to whoever can read `/proc/PID/environ` (the same user, root): a file readable by larder
//! alone is the way to give it. The file is read once, at start; it holds the token and at most one trailing
//! newline (`\n` or `\r\n`), nothing else.

use std::path::Path;

use super::ConfigError;

/// The token `admin_token_file` holds: read, one trailing newline removed, and checked.
pub fn read_token_file(path: &Path) -> Result<String, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid { field: "admin_token_file", message };
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
    let token = text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    if token.is_empty() {
        return Err(invalid(format!("{} is empty: it must hold the admin token", path.display())));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(format!(
            "{} holds more than one token: a token is printable ASCII without spaces, followed by at most one \
             newline",
            path.display()
        )));
    }
    refuse_writable_by_others(path)?;
    Ok(token.to_owned())
}

/// A token file that others may write lets them choose the token: refused. One that others may read is accepted
/// (container secret mounts are often 0444 in a namespace of their own) with a warning.
#[cfg(unix)]
fn refuse_writable_by_others(path: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?
        .permissions()
        .mode();
    if mode & 0o002 != 0 {
        return Err(ConfigError::Invalid {
            field: "admin_token_file",
            message: format!(
                "{} is writable by every user (mode {:04o}), who could choose the token: chmod 600 it",
                path.display(),
                mode & 0o7777
            ),
        });
    }
    if mode & 0o004 != 0 {
        tracing::warn!(
            file = %path.display(),
            mode = format!("{:04o}", mode & 0o7777),
            "the admin token file is readable by every user: chmod 600 it (or 640 for a group)"
        );
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_writable_by_others(_: &Path) -> Result<(), ConfigError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn a_token_file_holds_one_token_and_at_most_one_newline() {
        let dir = tempfile::tempdir().expect("dir");
        let read = |text: &str, mode: u32| read_token_file(&file(dir.path(), "t", text, mode));
        assert_eq!(read("s3cret\n", 0o600).ok(), Some("s3cret".into()));
        assert_eq!(read("s3cret\r\n", 0o600).ok(), Some("s3cret".into()));
        assert_eq!(read("s3cret", 0o644).ok(), Some("s3cret".into()), "readable by others: a warning, not a refusal");
        for bad in ["", "\n", "s3cret\n\n", "s3 cret", "s3cret\nother\n", " s3cret"] {
            assert!(read(bad, 0o600).is_err(), "{bad:?}");
        }
        assert!(read("s3cret\n", 0o602).is_err_and(|e| e.to_string().contains("writable by every user")));
        let missing = read_token_file(&dir.path().join("absent"));
        assert!(matches!(missing, Err(ConfigError::Read { .. })));
    }
}
