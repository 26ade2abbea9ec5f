//! `FileStore`: the `Store` operations on files (spec/STORES.md §7), each on tokio's blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use larder_store::expiry::expires_at_ms;
use larder_store::keys::{stored_key, stored_prefix};
use larder_store::{counter, OpenError, Purged, Store, StoreError, StoreStats, StoreUrl, Value};

use crate::layout::{decode, encode, expired, path_of};
use crate::scan::{open_no_follow, scan, shard_dirs_are_not_links, Scan};

const BACKEND: &str = "file";
/// How often the byte total is taken again by a scan (other processes write too).
const RESCAN_EVERY_MS: u64 = 60_000;

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
    total: AtomicU64,
    last_scan_ms: AtomicU64,
    evicting: AtomicBool,
}

impl FileStore {
    /// Opens (creating it) `file:///absolute/dir?capacity=10G&prefix=…`.
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
        url.finish()?;
        let root = PathBuf::from(&url.path);
        let inner = Inner {
            root: root.clone(),
            prefix,
            capacity,
            total: AtomicU64::new(0),
            last_scan_ms: AtomicU64::new(0),
            evicting: AtomicBool::new(false),
        };
        let inner = blocking(inner, |inner| {
            fs::create_dir_all(&inner.root).map_err(|e| inner.io(&e))?;
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

impl Inner {
    fn io(&self, error: &std::io::Error) -> StoreError {
        StoreError::Server { backend: BACKEND, server: self.root.display().to_string(), message: error.to_string() }
    }

    fn key(&self, key: &str) -> Result<String, StoreError> {
        Ok(stored_key(BACKEND, &self.prefix, key)?.into_owned())
    }

    fn keys(&self, keys: &[&str]) -> Result<Vec<String>, StoreError> {
        keys.iter().map(|k| self.key(k)).collect()
    }

    /// The bytes of the file at `path`, never through a link (a link, or a shard directory that is one, reads as
    /// absent).
    fn read_file(&self, path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
        if !shard_dirs_are_not_links(&self.root, path) {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        match open_no_follow(path).and_then(|mut f| f.read_to_end(&mut bytes)) {
            Ok(_) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
            Err(e) => Err(self.io(&e)),
        }
    }

    /// The value under a stored key, if its file is whole, is this key's, and has not expired.
    fn read(&self, key: &str, now: u64) -> Result<Option<Bytes>, StoreError> {
        let path = path_of(&self.root, key);
        let Some(bytes) = self.read_file(&path)? else { return Ok(None) };
        match decode(&bytes) {
            Some((expires_at, file_key, offset)) if file_key == key => {
                if expired(expires_at, now) {
                    let _ = fs::remove_file(&path);
                    return Ok(None);
                }
                Ok(Some(Bytes::from(bytes).slice(offset..)))
            }
            // Another key under the same name (a SHA-256 collision), or a file larder did not write: a miss, and the
            // file is left alone (a write of this key replaces it).
            _ => Ok(None),
        }
    }

    /// Writes a stored key's file atomically (temporary file, then rename).
    fn write(&self, key: &str, value: &[u8], expires_at: Option<u64>, now: u64) -> Result<(), StoreError> {
        let path = path_of(&self.root, key);
        self.refuse_links(&path)?;
        if expires_at.is_some_and(|at| at <= now) {
            // Only this key's own file is removed.
            return match self.read(key, now)? {
                Some(_) => self.remove(&path).map(|_| ()),
                None => Ok(()),
            };
        }
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| self.io(&e))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temporary = dir.join(format!(".{name}.{:016x}.tmp", fastrand::u64(..)));
        let bytes = encode(key, value, expires_at.unwrap_or(0));
        let written =
            File::create(&temporary).and_then(|mut f| f.write_all(&bytes)).and_then(|_| fs::rename(&temporary, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&temporary);
            return Err(self.io(&e));
        }
        self.total.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.keep_within_capacity(now);
        Ok(())
    }

    /// An error when a shard directory on the way to `path` is a link: larder never writes through one.
    fn refuse_links(&self, path: &Path) -> Result<(), StoreError> {
        if shard_dirs_are_not_links(&self.root, path) {
            return Ok(());
        }
        Err(StoreError::Server {
            backend: BACKEND,
            server: self.root.display().to_string(),
            message: format!("{} leads through a symbolic link: the file store does not follow links", path.display()),
        })
    }

    fn remove(&self, path: &Path) -> Result<bool, StoreError> {
        match fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.io(&e)),
        }
    }

    /// Holds the exclusive lock of a key's shard directory while `work` runs.
    fn locked<R>(&self, key: &str, work: impl FnOnce() -> Result<R, StoreError>) -> Result<R, StoreError> {
        let path = path_of(&self.root, key);
        self.refuse_links(&path)?;
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| self.io(&e))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir.join(".lock"))
            .map_err(|e| self.io(&e))?;
        lock.lock().map_err(|e| self.io(&e))?;
        let result = work();
        let _ = lock.unlock();
        result
    }

    /// larder's own files under the root, and how many things there are not (`scan.rs`).
    fn scan(&self) -> Scan {
        scan(&self.root)
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
            if fs::remove_file(&file.path).is_ok() {
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
            let path = file.path;
            let Ok(Some(bytes)) = self.read_file(&path) else { continue };
            // Checked again: the file may have been replaced since the scan.
            let Some((expires_at, key, offset)) = decode(&bytes).filter(|(_, key, _)| path_of(&self.root, key) == path)
            else {
                continue;
            };
            if expired(expires_at, now) {
                let _ = fs::remove_file(&path);
            } else if matches(key, &bytes[offset..]) && fs::remove_file(&path).is_ok() {
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
                let path = path_of(&inner.root, &stored);
                let current = match inner.read_file(&path)? {
                    Some(bytes) => decode(&bytes)
                        .filter(|(at, k, _)| *k == stored && !expired(*at, now))
                        .map(|(at, _, offset)| (at, bytes[offset..].to_vec())),
                    None => None,
                };
                let (next, expires_at) = match current {
                    Some((at, value)) => {
                        let n =
                            counter::parse(&value).ok_or(StoreError::NotACounter { backend: BACKEND, key: name })?;
                        (n.saturating_add(delta), (at != 0).then_some(at))
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
            inner.locked(&key, || match inner.read(&key, larder_format::now_ms())? {
                Some(value) if *value == *expected => inner.remove(&path_of(&inner.root, &key)),
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
                if inner.read(key, now)?.is_some() && inner.remove(&path_of(&inner.root, key))? {
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
