//! The file store's filesystem access below its root, which never follows a symbolic link (spec/STORES.md §7,
//! "Links are never followed below the root").
//!
//! Anyone who can write to the store's directory can plant links in it: a shard directory `<root>/6a/b9` that leads
//! to `/home/app/.ssh`, an entry that leads to `/etc/passwd`. A plain `create_dir_all`, `open` or `rename` follows a
//! link in every component but the last, and a check of each component with `lstat` before the call leaves a window
//! in which a link can be swapped in. So every path below the root is opened one component at a time from the
//! directory descriptor of the one before, each with `O_NOFOLLOW` (a link is `ELOOP`, never followed): directories
//! with `O_DIRECTORY`, files for reading only when `fstat` says they are regular, new files with `O_EXCL`, and
//! renames and deletes by name within a directory opened this way. The root itself is the operator's choice and may
//! be a link. What the store creates gets its `mode` (files) and the matching directory mode, narrowed by the umask.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, ErrorKind, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, CWD};

/// Open flags for a directory below the root.
const DIR: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
/// Open flags for reading a file: `NONBLOCK`, so that a FIFO planted under a file's name does not wait for a writer.
const READ: OFlags = OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::CLOEXEC);

/// Whether an open failed because the name is not something the store could have made there: a link (with
/// `O_NOFOLLOW`: `ELOOP`, or `ENOTDIR` for a directory open), a socket or a device (`ENXIO`), a directory where a
/// file was expected (`EISDIR`).
fn not_ours(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR | libc::ENXIO | libc::EISDIR))
}

/// A name within a directory, as the system calls take it.
fn name(text: &str) -> &OsStr {
    OsStr::from_bytes(text.as_bytes())
}

/// The mode of the directories the store creates for file mode `mode`: a search bit wherever there is a read bit
/// (0600 → 0700, 0640 → 0750).
pub fn dir_mode(mode: u32) -> u32 {
    mode | ((mode & 0o444) >> 2)
}

/// Opens the root (following a link there: the operator's choice), creating it and its missing parents with
/// `dir_mode` when `create` is given.
pub fn open_root(root: &Path, create: Option<u32>) -> io::Result<OwnedFd> {
    let open = || rustix::fs::openat(CWD, root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty());
    match (open(), create) {
        (Ok(fd), _) => Ok(fd),
        (Err(e), Some(mode)) if e == rustix::io::Errno::NOENT => {
            std::fs::DirBuilder::new().recursive(true).mode(mode).create(root)?;
            Ok(open()?)
        }
        (Err(e), _) => Err(e.into()),
    }
}

/// What opening a directory below the root found.
pub enum Dir {
    Open(OwnedFd),
    /// Absent (and not to be created).
    Missing,
    /// A link, or not a directory: never entered.
    NotOurs,
}

/// The directory `child` of `parent`, never through a link; made with `create` (a directory mode) when absent.
pub fn open_dir(parent: BorrowedFd<'_>, child: &str, create: Option<u32>) -> io::Result<Dir> {
    match rustix::fs::openat(parent, name(child), DIR, Mode::empty()) {
        Ok(fd) => return Ok(Dir::Open(fd)),
        Err(e) => {
            let e = io::Error::from(e);
            if not_ours(&e) {
                return Ok(Dir::NotOurs);
            }
            if e.kind() != ErrorKind::NotFound {
                return Err(e);
            }
        }
    }
    let Some(mode) = create else { return Ok(Dir::Missing) };
    match rustix::fs::mkdirat(parent, name(child), Mode::from_raw_mode(mode)) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::EXIST => {}
        Err(e) => return Err(e.into()),
    }
    match rustix::fs::openat(parent, name(child), DIR, Mode::empty()) {
        Ok(fd) => Ok(Dir::Open(fd)),
        Err(e) => {
            let e = io::Error::from(e);
            if not_ours(&e) {
                Ok(Dir::NotOurs)
            } else {
                Err(e)
            }
        }
    }
}

/// The regular file `child` of `dir`, opened for reading; `None` when it is absent, a link or anything but a regular
/// file.
pub fn open_regular(dir: BorrowedFd<'_>, child: &str) -> io::Result<Option<File>> {
    let file = match rustix::fs::openat(dir, name(child), READ, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(e) => {
            let e = io::Error::from(e);
            return if e.kind() == ErrorKind::NotFound || not_ours(&e) { Ok(None) } else { Err(e) };
        }
    };
    Ok(file.metadata()?.is_file().then_some(file))
}

/// Whether `child` of `dir` is a symbolic link (without following it).
pub fn is_link(dir: BorrowedFd<'_>, child: &str) -> io::Result<bool> {
    match rustix::fs::statat(dir, name(child), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(FileType::from_raw_mode(stat.st_mode).is_symlink()),
        Err(e) if e == rustix::io::Errno::NOENT => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Writes `data` to the new file `temporary` (created with `mode`, never through a link) and renames it over
/// `child`: a reader sees the old file or the new one.
pub fn replace(dir: BorrowedFd<'_>, child: &str, temporary: &str, data: &[u8], mode: u32) -> io::Result<()> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let written = rustix::fs::openat(dir, name(temporary), flags, Mode::from_raw_mode(mode))
        .map_err(io::Error::from)
        .and_then(|fd| File::from(fd).write_all(data))
        .and_then(|()| rustix::fs::renameat(dir, name(temporary), dir, name(child)).map_err(io::Error::from));
    if written.is_err() {
        let _ = unlink(dir, temporary);
    }
    written
}

/// Removes the name `child` from `dir` (a link there is removed, never followed); whether it was there.
pub fn unlink(dir: BorrowedFd<'_>, child: &str) -> io::Result<bool> {
    match rustix::fs::unlinkat(dir, name(child), AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::NOENT => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Removes `child` from `dir` if it is still the regular file `ino` (a scan or read found it, and another process
/// may have replaced it since); whether it did.
pub fn unlink_if(dir: BorrowedFd<'_>, child: &str, ino: u64) -> io::Result<bool> {
    match rustix::fs::statat(dir, name(child), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode).is_file() && stat.st_ino == ino => unlink(dir, child),
        Ok(_) => Ok(false),
        Err(e) if e == rustix::io::Errno::NOENT => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// An exclusive `flock` on the regular file `child` of `dir` (created with `mode` when absent), held until dropped.
pub struct Lock(File);

pub fn lock(dir: BorrowedFd<'_>, child: &str, mode: u32) -> io::Result<Lock> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::openat(dir, name(child), flags, Mode::from_raw_mode(mode))?);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(ErrorKind::InvalidData, format!("{child} is not a regular file")));
    }
    rustix::fs::flock(&file, FlockOperation::LockExclusive)?;
    Ok(Lock(file))
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, FlockOperation::Unlock);
    }
}

/// The names in `dir` and whether each is a directory, as the directory itself says (`d_type`, which does not
/// follow links: a link to a directory is not one). `.` and `..` are left out.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<(String, bool)>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir.as_fd())? {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let child = String::from_utf8_lossy(bytes).into_owned();
        let is_dir = match entry.file_type() {
            // Some filesystems do not say: ask, without following a link.
            FileType::Unknown => match rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode).is_dir(),
                Err(_) => false,
            },
            known => known.is_dir(),
        };
        // Names that are not UTF-8 are never the store's, and are counted as foreign by name.
        names.push((child, is_dir));
    }
    Ok(names)
}
