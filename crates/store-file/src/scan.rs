//! Finding the store's own files (spec/STORES.md §7, "A file store deletes only files it wrote"). The directory may
//! hold an operator's other files, or links planted by anyone who can write to it; capacity eviction, purges,
//! `clear` and `stats` walk it, so the walk decides what larder may delete. It never follows a symbolic link, and
//! it calls a file larder's only when the file proves it: a regular file at `<2 hex>/<2 hex>/<64 hex>` under those
//! directories, starting with `LDR1`, with a key length that fits, and a key whose SHA-256 is the file's name.
//! Everything else is *foreign*: counted for `stats`, never touched.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::layout::{HEADER_LEN, MAGIC};

/// One of larder's files.
pub struct OwnFile {
    pub path: PathBuf,
    pub size: u64,
    pub modified: SystemTime,
}

/// What a walk of the root found.
#[derive(Default)]
pub struct Scan {
    pub files: Vec<OwnFile>,
    /// Files, links and directories that are not larder's (names starting with `.` in shard directories, larder's
    /// temporary files and locks, are neither).
    pub foreign: u64,
}

/// Opens a file for reading without following a link in its last component (a link is an error, `ELOOP`).
pub fn open_no_follow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// Whether the two shard directories of `path` (`<root>/<a>/<b>/<name>`) are real directories or absent, never
/// links: reads and writes go through them, so a link there would lead outside the root.
pub fn shard_dirs_are_not_links(root: &Path, path: &Path) -> bool {
    let Some(b) = path.parent() else { return false };
    let Some(a) = b.parent() else { return false };
    [a, b].iter().all(|dir| match fs::symlink_metadata(dir) {
        Ok(meta) => meta.file_type().is_dir(),
        Err(_) => true,
    }) && a.parent() == Some(root)
}

/// Walks `root` (two levels of shard directories).
pub fn scan(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let Ok(level1) = fs::read_dir(root) else { return scan };
    for a in level1.flatten() {
        let a_name = a.file_name().to_string_lossy().into_owned();
        if !a.file_type().is_ok_and(|t| t.is_dir()) || !is_hex(&a_name, 2) {
            scan.foreign += 1;
            continue;
        }
        let Ok(level2) = fs::read_dir(a.path()) else { continue };
        for b in level2.flatten() {
            let b_name = b.file_name().to_string_lossy().into_owned();
            if b_name.starts_with('.') {
                continue;
            }
            if !b.file_type().is_ok_and(|t| t.is_dir()) || !is_hex(&b_name, 2) {
                scan.foreign += 1;
                continue;
            }
            let Ok(files) = fs::read_dir(b.path()) else { continue };
            for file in files.flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                let is_file = file.file_type().is_ok_and(|t| t.is_file());
                let named = is_hex(&name, 64) && name[..2] == a_name && name[2..4] == b_name;
                match (is_file && named).then(|| own_file(&file.path(), &name)).flatten() {
                    Some(own) => scan.files.push(own),
                    None => scan.foreign += 1,
                }
            }
        }
    }
    scan
}

/// The file at `path`, if its header proves it larder's: magic, a key length that fits, the key's hash as name.
fn own_file(path: &Path, name: &str) -> Option<OwnFile> {
    let mut file = open_no_follow(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_exact(&mut head).ok()?;
    let key_len = usize::from(u16::from_le_bytes([head[12], head[13]]));
    if &head[..4] != MAGIC || (HEADER_LEN + key_len) as u64 > meta.len() {
        return None;
    }
    let mut key = vec![0u8; key_len];
    file.read_exact(&mut key).ok()?;
    (hex::encode(Sha256::digest(&key)) == name).then(|| OwnFile {
        path: path.to_owned(),
        size: meta.len(),
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    })
}

/// Whether `text` is exactly `len` lowercase hexadecimal digits.
fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
