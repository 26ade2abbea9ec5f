//! Finding the store's own files (spec/STORES.md §7, "A file store deletes only files it wrote"). The directory may
//! hold an operator's other files, or links planted by anyone who can write to it; capacity eviction, purges,
//! `clear` and `stats` walk it, so the walk decides what larder may delete. It goes one directory at a time from
//! descriptors (dirfd.rs), never following a symbolic link, and calls a file larder's only when the file proves it:
//! a regular file at `<2 hex>/<2 hex>/<64 hex>` under those directories, starting with `LDR1`, with a key length
//! that fits, and a key whose SHA-256 is the file's name. Everything else is *foreign*: counted for `stats`, never
//! touched.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::dirfd::{self, Dir};
use crate::layout::{HEADER_LEN, MAGIC};

/// One of larder's files, as a scan found it.
pub struct OwnFile {
    /// The file's name (the SHA-256 of its key, whose first four digits name its shard directories).
    pub name: String,
    pub size: u64,
    pub modified: SystemTime,
    /// Which file it was: a delete checks that the name still holds this one.
    pub ino: u64,
}

/// What a walk of the root found.
#[derive(Default)]
pub struct Scan {
    pub files: Vec<OwnFile>,
    /// Files, links and directories that are not larder's (names starting with `.` in shard directories, larder's
    /// temporary files and locks, are neither).
    pub foreign: u64,
}

/// Walks the root (two levels of shard directories) from its descriptor.
pub fn scan(root: BorrowedFd<'_>) -> Scan {
    let mut scan = Scan::default();
    let Ok(level1) = dirfd::list(root) else { return scan };
    for (a, a_is_dir) in level1 {
        if !a_is_dir || !is_hex(&a, 2) {
            scan.foreign += 1;
            continue;
        }
        let Ok(Dir::Open(a_fd)) = dirfd::open_dir(root, &a, None) else {
            scan.foreign += 1;
            continue;
        };
        let Ok(level2) = dirfd::list(a_fd.as_fd()) else { continue };
        for (b, b_is_dir) in level2 {
            if b.starts_with('.') {
                continue;
            }
            if !b_is_dir || !is_hex(&b, 2) {
                scan.foreign += 1;
                continue;
            }
            let Ok(Dir::Open(b_fd)) = dirfd::open_dir(a_fd.as_fd(), &b, None) else {
                scan.foreign += 1;
                continue;
            };
            let Ok(files) = dirfd::list(b_fd.as_fd()) else { continue };
            for (name, _) in files {
                if name.starts_with('.') {
                    continue;
                }
                let named = is_hex(&name, 64) && name[..2] == a && name[2..4] == b;
                match named.then(|| own_file(b_fd.as_fd(), &name)).flatten() {
                    Some((size, modified, ino)) => scan.files.push(OwnFile { name, size, modified, ino }),
                    None => scan.foreign += 1,
                }
            }
        }
    }
    scan
}

/// The size, modification time and inode of the file `name` in `dir`, if its header proves it larder's: a regular
/// file (never through a link), the magic, a key length that fits, the key's hash as name.
pub fn own_file(dir: BorrowedFd<'_>, name: &str) -> Option<(u64, SystemTime, u64)> {
    let mut file: File = dirfd::open_regular(dir, name).ok()??;
    let meta = file.metadata().ok()?;
    let mut head = [0u8; HEADER_LEN];
    file.read_exact(&mut head).ok()?;
    let key_len = usize::from(u16::from_le_bytes([head[12], head[13]]));
    if &head[..4] != MAGIC || (HEADER_LEN + key_len) as u64 > meta.len() {
        return None;
    }
    let mut key = vec![0u8; key_len];
    file.read_exact(&mut key).ok()?;
    (hex::encode(Sha256::digest(&key)) == name)
        .then(|| (meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.ino()))
}

/// Whether `text` is exactly `len` lowercase hexadecimal digits.
fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
