//! `FileStore`: the `Store` operations on files (spec/STORES.md §7), each on tokio's blocking pool. Every path
//! below the root goes through dirfd.rs, which never follows a symbolic link: a link in a shard directory or at an
//! entry's name makes a read a miss, a delete a no-op and a write an error, and the link and its target are left
//! as they are. Files are created with the URL's `mode` (default 0600: a cache of private pages is the owner's).

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use larder_store::expiry::expires_at_ms;
use larder_store::keys::{stored_key, stored_prefix};
use larder_store::{counter, OpenError, Purged, Store, StoreError, StoreStats, StoreUrl, Value};
use sha2::{Digest, Sha256};

use crate::dirfd::{self, Dir};
use crate::layout::{decode, encode, expired};
use crate::scan::{scan, Scan};

const BACKEND: &str = "file";
/// How often the byte total is taken again by a scan (other processes write too).
const RESCAN_EVERY_MS: u64 = 60_000;
/// The mode of value files without `mode=`: the owner's alone.
const DEFAULT_MODE: u32 = 0o600;

/// A directory of entries (cheap to clone).
#[derive(Clone)]
pub struct FileStore {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    prefix: String,
    /// 0 = unbounded.
    capacity: u64,
    /// The mode of the files the store creates; directories get [`dirfd::dir_mode`] of it.
    mode: u32,
    total: AtomicU64,
    last_scan_ms: AtomicU64,
    evicting: AtomicBool,
}

/// `mode=`: three or four octal digits, permission bits only, giving the owner read and write.
fn parse_mode(url: &StoreUrl, text: Option<String>) -> Result<u32, OpenError> {
    let Some(text) = text else { return Ok(DEFAULT_MODE) };
    let digits = (3..=4).contains(&text.len()) && text.bytes().all(|b| (b'0'..=b'7').contains(&b));
    let mode = u32::from_str_radix(&text, 8).ok().filter(|_| digits);
    match mode {
        Some(mode) if mode <= 0o777 && mode & 0o600 == 0o600 => Ok(mode),
        _ => Err(url
            .error(format!(
                "mode={text:?}: give three or four octal digits of permission bits that let the owner read and \
                 write, such as 0600 (the default) or 0640"
            ))
            .into()),
    }
}

impl FileStore {
    /// Opens (creating it) `file:///absolute/dir?capacity=10G&mode=0640&prefix=…`.
    pub async fn open(mut url: StoreUrl) -> Result<FileStore, OpenError> {
        if url.scheme != "file" {
            return Err(url.error("not a file:// URL").into());
        }
        url.no_hosts()?;
        if !url.path.starts_with('/') || url.path.len() < 2 {
            return Err(url.error("file:// needs an absolute directory: file:///var/cache/larder").into());
        }
        let prefix = url.take("prefix").unwrap_or_default();
        let capacity = url.take_size("capacity", 0)?;
        let mode = url.take("mode");
        let mode = parse_mode(&url, mode)?;
        url.finish()?;
        let inner = Inner {
            root: PathBuf::from(&url.path),
            prefix,
            capacity,
            mode,
            total: AtomicU64::new(0),
            last_scan_ms: AtomicU64::new(0),
            evicting: AtomicBool::new(false),
        };
        let inner = blocking(inner, |inner| {
            inner.root_fd(true)?;
            inner.rescan();
            Ok(inner)
        })
        .await?;
        Ok(FileStore { inner: Arc::new(inner) })
    }
}

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static, R: Send + 'static>(
    input: T,
    work: impl FnOnce(T) -> Result<R, StoreError> + Send + 'static,
) -> Result<R, StoreError> {
    tokio::task::spawn_blocking(move || work(input)).await.map_err(|e| StoreError::Server {
        backend: BACKEND,
        server: "blocking pool".into(),
        message: e.to_string(),
    })?
}

/// The file name of a stored key: the hex SHA-256 of its bytes.
fn name_of(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A file of the store as a read found it: its expiry, its value, and which file it was.
struct Found {
    expires_at: u64,
    value: Bytes,
    ino: u64,
}

impl Inner {
    fn io(&self, error: &std::io::Error) -> StoreError {
        StoreError::Server { backend: BACKEND, server: self.root.display().to_string(), message: error.to_string() }
    }

    fn error(&self, message: String) -> StoreError {
        StoreError::Server { backend: BACKEND, server: self.root.display().to_string(), message }
    }

    fn key(&self, key: &str) -> Result<String, StoreError> {
        Ok(stored_key(BACKEND, &self.prefix, key)?.into_owned())
    }

    fn keys(&self, keys: &[&str]) -> Result<Vec<String>, StoreError> {
        keys.iter().map(|k| self.key(k)).collect()
    }

    /// The root's descriptor (created with its parents when `create` and missing).
    fn root_fd(&self, create: bool) -> Result<OwnedFd, StoreError> {
        dirfd::open_root(&self.root, create.then(|| dirfd::dir_mode(self.mode))).map_err(|e| self.io(&e))
    }

    /// The shard directory of the file `name`, entered without following a link. `None` when it is absent or is
    /// not a directory the store could have made (a link); with `create`, made when absent, and a link or other
    /// non-directory on the way is an error.
    fn shard(&self, name: &str, create: bool) -> Result<Option<OwnedFd>, StoreError> {
        let mode = create.then(|| dirfd::dir_mode(self.mode));
        let root = match self.root_fd(create) {
            Ok(root) => root,
            Err(_) if !create => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut dir = root;
        for part in [&name[0..2], &name[2..4]] {
            dir = match dirfd::open_dir(dir.as_fd(), part, mode).map_err(|e| self.io(&e))? {
                Dir::Open(fd) => fd,
                Dir::Missing => return Ok(None),
                Dir::NotOurs if create => {
                    return Err(self.error(format!(
                        "{}/{}/{}: a symbolic link or not a directory, on the way to the file of a key: the file \
                         store does not follow links, and left it as it is",
                        self.root.display(),
                        &name[0..2],
                        &name[2..4]
                    )))
                }
                Dir::NotOurs => return Ok(None),
            };
        }
        Ok(Some(dir))
    }

    /// The store's file of a stored key, whole, if it is this key's (whatever its expiry); `None` when absent, a
    /// link, not a regular file, not the store's form or another key's.
    fn read_found(&self, shard: &OwnedFd, name: &str, key: &str) -> Result<Option<Found>, StoreError> {
        let Some(mut file) = dirfd::open_regular(shard.as_fd(), name).map_err(|e| self.io(&e))? else {
            return Ok(None);
        };
        let ino = file.metadata().map_err(|e| self.io(&e))?.ino();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| self.io(&e))?;
        match decode(&bytes) {
            Some((expires_at, file_key, offset)) if file_key == key => {
                Ok(Some(Found { expires_at, value: Bytes::from(bytes).slice(offset..), ino }))
            }
            // Another key under the same name (a SHA-256 collision), or a file larder did not write: a miss, and the
            // file is left alone (a write of this key replaces it).
            _ => Ok(None),
        }
    }

    /// The live value of a stored key, with its expiry; an expired file is deleted (if it is still the one read).
    fn read_live(&self, key: &str, now: u64) -> Result<Option<Found>, StoreError> {
        let name = name_of(key);
        let Some(shard) = self.shard(&name, false)? else { return Ok(None) };
        let Some(found) = self.read_found(&shard, &name, key)? else { return Ok(None) };
        if expired(found.expires_at, now) {
            let _ = dirfd::unlink_if(shard.as_fd(), &name, found.ino);
            return Ok(None);
        }
        Ok(Some(found))
    }

    fn read(&self, key: &str, now: u64) -> Result<Option<Bytes>, StoreError> {
        Ok(self.read_live(key, now)?.map(|found| found.value))
    }

    /// Deletes a stored key's file if it is this key's; whether it held a live value.
    fn remove(&self, key: &str, now: u64) -> Result<bool, StoreError> {
        let name = name_of(key);
        let Some(shard) = self.shard(&name, false)? else { return Ok(false) };
        let Some(found) = self.read_found(&shard, &name, key)? else { return Ok(false) };
        let removed = dirfd::unlink_if(shard.as_fd(), &name, found.ino).map_err(|e| self.io(&e))?;
        Ok(removed && !expired(found.expires_at, now))
    }

    /// Writes a stored key's file atomically (temporary file, then rename), never through a link.
    fn write(&self, key: &str, value: &[u8], expires_at: Option<u64>, now: u64) -> Result<(), StoreError> {
        if expires_at.is_some_and(|at| at <= now) {
            // Only this key's own file is removed.
            return self.remove(key, now).map(|_| ());
        }
        let name = name_of(key);
        let shard = self.shard(&name, true)?.ok_or_else(|| self.error(format!("cannot create the shard of {name}")))?;
        if dirfd::is_link(shard.as_fd(), &name).map_err(|e| self.io(&e))? {
            return Err(self.error(format!(
                "{}/{}/{}/{name} is a symbolic link: the file store does not write through or replace links",
                self.root.display(),
                &name[0..2],
                &name[2..4]
            )));
        }
        let temporary = format!(".{name}.{:016x}.tmp", fastrand::u64(..));
        let bytes = encode(key, value, expires_at.unwrap_or(0));
        dirfd::replace(shard.as_fd(), &name, &temporary, &bytes, self.mode).map_err(|e| self.io(&e))?;
        self.total.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.keep_within_capacity(now);
        Ok(())
    }

    /// Holds the exclusive lock of a key's shard directory while `work` runs.
    fn locked<R>(&self, key: &str, work: impl FnOnce() -> Result<R, StoreError>) -> Result<R, StoreError> {
        let name = name_of(key);
        let shard = self.shard(&name, true)?.ok_or_else(|| self.error(format!("cannot create the shard of {name}")))?;
        let _lock = dirfd::lock(shard.as_fd(), ".lock", self.mode).map_err(|e| self.io(&e))?;
        work()
    }

    /// larder's own files under the root, and how many things there are not (`scan.rs`).
    fn scan(&self) -> Scan {
        match self.root_fd(false) {
            Ok(root) => scan(root.as_fd()),
            Err(_) => Scan::default(),
        }
    }

    fn rescan(&self) {
        let total = self.scan().files.iter().map(|f| f.size).sum();
        self.total.store(total, Ordering::Relaxed);
        self.last_scan_ms.store(larder_format::now_ms(), Ordering::Relaxed);
    }

    /// Past the capacity, deletes the least recently written files until under 90% of it.
    fn keep_within_capacity(&self, now: u64) {
        if self.capacity == 0 {
            return;
        }
        if now.saturating_sub(self.last_scan_ms.load(Ordering::Relaxed)) > RESCAN_EVERY_MS {
            self.rescan();
        }
        if self.total.load(Ordering::Relaxed) <= self.capacity || self.evicting.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut files = self.scan().files;
        let mut total: u64 = files.iter().map(|f| f.size).sum();
        files.sort_by_key(|f| f.modified);
        let target = self.capacity / 10 * 9;
        for file in files {
            if total <= target {
                break;
            }
            let Ok(Some(shard)) = self.shard(&file.name, false) else { continue };
            if dirfd::unlink_if(shard.as_fd(), &file.name, file.ino).unwrap_or(false) {
                total = total.saturating_sub(file.size);
            }
        }
        self.total.store(total, Ordering::Relaxed);
        self.evicting.store(false, Ordering::Release);
    }

    /// Deletes every file `matches` (given its key and value) says; how many.
    fn purge(&self, matches: impl Fn(&str, &[u8]) -> bool) -> usize {
        let now = larder_format::now_ms();
        let mut purged = 0;
        for file in self.scan().files {
            let Ok(Some(shard)) = self.shard(&file.name, false) else { continue };
            let Ok(Some(mut opened)) = dirfd::open_regular(shard.as_fd(), &file.name) else { continue };
            let mut bytes = Vec::new();
            if opened.read_to_end(&mut bytes).is_err() {
                continue;
            }
            let ino = opened.metadata().map(|m| m.ino()).unwrap_or(0);
            // Checked again: the file may have been replaced since the scan.
            let Some((expires_at, key, offset)) = decode(&bytes).filter(|(_, key, _)| name_of(key) == file.name) else {
                continue;
            };
            if expired(expires_at, now) {
                let _ = dirfd::unlink_if(shard.as_fd(), &file.name, ino);
            } else if matches(key, &bytes[offset..])
                && dirfd::unlink_if(shard.as_fd(), &file.name, ino).unwrap_or(false)
            {
                purged += 1;
            }
        }
        self.rescan();
        purged
    }
}

impl Store for FileStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// A file may be as large as the bound allows (or 1 GiB without one).
    fn max_value_bytes(&self) -> usize {
        match self.inner.capacity {
            0 => 1 << 30,
            capacity => usize::try_from(capacity / 2).unwrap_or(usize::MAX),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        Ok(self.get_many(&[key]).await?.pop().flatten())
    }

    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        let inner = self.inner.clone();
        let keys = self.inner.keys(keys)?;
        blocking((), move |()| {
            let now = larder_format::now_ms();
            keys.iter().map(|k| inner.read(k, now).map(|v| v.map(Value::from))).collect()
        })
        .await
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.set_many(&[(key, value)], ttl).await
    }

    async fn set_many(&self, items: &[(&str, &[u8])], ttl: Option<Duration>) -> Result<(), StoreError> {
        let limit = self.max_value_bytes();
        for (key, value) in items {
            if value.len() > limit {
                return Err(StoreError::TooLarge {
                    backend: BACKEND,
                    key: (*key).to_owned(),
                    size: value.len(),
                    limit,
                });
            }
        }
        let inner = self.inner.clone();
        let items = items
            .iter()
            .map(|(k, v)| Ok((self.inner.key(k)?, v.to_vec())))
            .collect::<Result<Vec<(String, Vec<u8>)>, StoreError>>()?;
        blocking((), move |()| {
            let now = larder_format::now_ms();
            for (key, value) in &items {
                inner.write(key, value, expires_at_ms(value, ttl, now), now)?;
            }
            Ok(())
        })
        .await
    }

    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        let limit = self.max_value_bytes();
        if value.len() > limit {
            return Err(StoreError::TooLarge { backend: BACKEND, key: key.to_owned(), size: value.len(), limit });
        }
        let (inner, key, value) = (self.inner.clone(), self.inner.key(key)?, value.to_vec());
        blocking((), move |()| {
            inner.locked(&key, || {
                let now = larder_format::now_ms();
                let expiry = expires_at_ms(&value, ttl, now);
                if expiry.is_some_and(|at| at <= now) || inner.read(&key, now)?.is_some() {
                    return Ok(false);
                }
                inner.write(&key, &value, expiry, now)?;
                Ok(true)
            })
        })
        .await
    }

    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        let (inner, stored, name) = (self.inner.clone(), self.inner.key(key)?, key.to_owned());
        blocking((), move |()| {
            inner.locked(&stored, || {
                let now = larder_format::now_ms();
                let (next, expires_at) = match inner.read_live(&stored, now)? {
                    Some(found) => {
                        let n = counter::parse(&found.value)
                            .ok_or(StoreError::NotACounter { backend: BACKEND, key: name })?;
                        (n.saturating_add(delta), (found.expires_at != 0).then_some(found.expires_at))
                    }
                    None if create => (delta, ttl.map(|t| now + t.as_millis() as u64)),
                    None => return Ok(None),
                };
                inner.write(&stored, counter::format(next).as_bytes(), expires_at, now)?;
                Ok(Some(next))
            })
        })
        .await
    }

    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        let (inner, key, expected) = (self.inner.clone(), self.inner.key(key)?, expected.to_vec());
        blocking((), move |()| {
            let now = larder_format::now_ms();
            // Nothing to delete (absent, or behind a link): no lock needed, and none is created through a link.
            if inner.read(&key, now)?.is_none_or(|value| *value != *expected) {
                return Ok(false);
            }
            inner.locked(&key, || match inner.read(&key, now)? {
                Some(value) if *value == *expected => inner.remove(&key, now),
                _ => Ok(false),
            })
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.delete_many(&[key]).await? == 1)
    }

    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        let inner = self.inner.clone();
        let keys = self.inner.keys(keys)?;
        blocking((), move |()| {
            let now = larder_format::now_ms();
            let mut deleted = 0;
            for key in &keys {
                if inner.remove(key, now)? {
                    deleted += 1;
                }
            }
            Ok(deleted)
        })
        .await
    }

    async fn clear(&self) -> Result<(), StoreError> {
        let prefix = self.inner.prefix.clone();
        let inner = self.inner.clone();
        blocking((), move |()| {
            inner.purge(|key, _| key.starts_with(&prefix));
            Ok(())
        })
        .await
    }

    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        let prefix = stored_prefix(BACKEND, &self.inner.prefix, prefix)?.into_owned();
        let inner = self.inner.clone();
        blocking((), move |()| Ok(Purged::Removed(inner.purge(|key, _| key.starts_with(&prefix))))).await
    }

    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        let (inner, tag, prefix) = (self.inner.clone(), tag.to_owned(), self.inner.prefix.clone());
        blocking((), move |()| {
            Ok(Purged::Removed(inner.purge(|key, value| {
                key.starts_with(&prefix)
                    && larder_format::Header::parse(value).is_ok_and(|(header, _)| header.tags.contains(&tag.as_str()))
            })))
        })
        .await
    }

    async fn stats(&self) -> Result<StoreStats, StoreError> {
        let inner = self.inner.clone();
        blocking((), move |()| {
            let scan = inner.scan();
            Ok(StoreStats {
                entries: scan.files.len() as u64,
                bytes: scan.files.iter().map(|f| f.size).sum(),
                capacity_bytes: inner.capacity,
                foreign: scan.foreign,
                ..StoreStats::default()
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_three_or_four_octal_digits_that_let_the_owner_read_and_write() {
        let url = StoreUrl::parse("file:///tmp/x").expect("url");
        let mode = |text: &str| parse_mode(&url, Some(text.to_owned())).ok();
        assert_eq!(parse_mode(&url, None).ok(), Some(0o600));
        assert_eq!(
            (mode("0600"), mode("640"), mode("0644"), mode("0666")),
            (Some(0o600), Some(0o640), Some(0o644), Some(0o666))
        );
        for bad in ["0400", "0200", "0000", "4600", "1600", "00600", "60", "0680", "rw", "", "+600", "0o600"] {
            assert_eq!(mode(bad), None, "{bad}");
        }
        assert!(parse_mode(&url, Some("0400".into())).is_err_and(|e| e.to_string().contains("mode")));
        assert_eq!((dirfd::dir_mode(0o600), dirfd::dir_mode(0o640), dirfd::dir_mode(0o644)), (0o700, 0o750, 0o755));
    }
}
