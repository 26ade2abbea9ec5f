//! hostile_keys.json (spec/STORES.md §2, "Wire bytes are the checked bytes"): every class of hostile key against
//! every store, opened from its URL without a prefix. A refused key fails every operation with `invalid_key` and
//! leaves the server as it was; a stored key goes on the wire as exactly the bytes that were checked, which the raw
//! probes below find by sending `wire_hex`'s bytes themselves (small socket and file code of this runner's own,
//! written from the README, that never sees the key as a string).
//!
//! Rust keys are `&str`. A case without `key_utf16`, or whose code units are not valid UTF-16 (an unpaired
//! surrogate), cannot be written in the type at all: it is refused by the type, before any store sees it, and is
//! counted as such (a `stored` case the type could not carry would fail).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use larder_store::{DynStore, StoreError};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{cases, each, entry_bytes, str_field, Checked, Servers};

pub fn check(path: &Path, servers: &Servers) -> Checked {
    let doc = crate::load(path)?;
    let cases = cases(&doc)?;
    let entry = entry_bytes(&doc)?;
    let sentinel = &doc["sentinel"];
    let sentinel = (
        sentinel["key"].as_str().ok_or("sentinel.key")?.to_owned(),
        sentinel["value"].as_str().ok_or("sentinel.value")?.as_bytes().to_vec(),
    );
    let memcached = servers.memcached.clone().ok_or("LARDER_CONFORMANCE_MEMCACHED is not set: no memcached to try")?;
    let redis = servers.redis.clone().ok_or("LARDER_CONFORMANCE_REDIS is not set: no redis-server to try")?;
    let runtime = crate::runtime()?;
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let context = Context { entry, sentinel, memcached, redis, dir: dir.path().to_owned() };
    Ok(each(cases, |case| runtime.block_on(one_case(&context, case))))
}

struct Context {
    entry: Vec<u8>,
    sentinel: (String, Vec<u8>),
    memcached: String,
    redis: String,
    dir: PathBuf,
}

/// Where a case runs: the store's URL, and how its raw probe reaches what the store wrote.
enum Backend {
    Memory,
    File(PathBuf),
    Sqlite,
    Memcached(String),
    Redis(String),
}

async fn one_case(context: &Context, case: &Value) {
    let name = str_field(case, "name");
    let outcome = str_field(case, "outcome");
    let key = case["key_utf16"].as_array().and_then(|units| {
        let units: Vec<u16> = units.iter().map(|u| u.as_u64().expect("a code unit") as u16).collect();
        String::from_utf16(&units).ok()
    });
    let Some(key) = key else {
        // Not UTF-16 nor given as such: a `&str` cannot hold it, so no store can be handed it.
        assert_eq!(outcome, "refused", "{name}: a key Rust's &str cannot hold is expected to be stored");
        return;
    };
    assert_eq!(key.as_bytes(), hex::decode(str_field(case, "key_hex")).expect("key_hex"), "{name}: key_hex");
    let root = context.dir.join(name).join("files");
    let backends = [
        ("memory", "memory://".to_owned(), Backend::Memory),
        ("file", format!("file://{}", root.display()), Backend::File(root.clone())),
        ("sqlite", format!("sqlite://{}/cache.db", context.dir.join(name).display()), Backend::Sqlite),
        (
            "memcached",
            format!("memcached://{}?failures=1000", context.memcached),
            Backend::Memcached(context.memcached.clone()),
        ),
        ("redis", format!("redis://{}?failures=1000", context.redis), Backend::Redis(context.redis.clone())),
    ];
    std::fs::create_dir_all(&root).expect("a directory for the case");
    for (label, url, backend) in backends {
        let store = larder_stores::open(&url).await.unwrap_or_else(|e| panic!("{label}: {url} opens: {e}"));
        prepare(context, &backend, &store, label).await;
        match outcome {
            "refused" => refused(context, &backend, &store, &key, label).await,
            "stored" => {
                let wire = hex::decode(str_field(case, "wire_hex")).expect("wire_hex");
                stored(context, &backend, &store, &key, &wire, label).await;
            }
            other => panic!("unknown outcome {other:?}"),
        }
    }
}

/// memcached and Redis: flushed through a raw socket, then the sentinel written through the store.
async fn prepare(context: &Context, backend: &Backend, store: &Arc<dyn DynStore>, label: &str) {
    let flushed = match backend {
        Backend::Memcached(address) => memcached_line(address, b"flush_all\r\n").expect("flush_all") == "OK",
        Backend::Redis(address) => redis(address, &[b"FLUSHALL"]).expect("FLUSHALL") == Resp::Status("OK".into()),
        _ => return,
    };
    assert!(flushed, "{label}: the server flushed");
    let (key, value) = &context.sentinel;
    store.set(key, value, None).await.unwrap_or_else(|e| panic!("{label}: the sentinel written: {e}"));
}

async fn refused(context: &Context, backend: &Backend, store: &Arc<dyn DynStore>, key: &str, label: &str) {
    let invalid = |what: &str, result: Result<(), StoreError>| match result {
        Err(StoreError::InvalidKey { .. }) => {}
        other => panic!("{label} {what}: invalid_key expected, got {other:?}"),
    };
    let entry = context.entry.as_slice();
    invalid("get", store.get(key).await.map(drop));
    invalid("get_many", store.get_many(&[key]).await.map(drop));
    invalid("set", store.set(key, entry, None).await);
    invalid("add", store.add(key, entry, None).await.map(drop));
    invalid("delete", store.delete(key).await.map(drop));
    if !key.is_empty() {
        invalid("purge_prefix", store.purge_prefix(key).await.map(drop));
    }
    sentinel_intact(context, backend, label, 1);
}

async fn stored(context: &Context, backend: &Backend, store: &Arc<dyn DynStore>, key: &str, wire: &[u8], label: &str) {
    let entry = context.entry.as_slice();
    store.set(key, entry, None).await.unwrap_or_else(|e| panic!("{label} set: {e}"));
    let got = store.get(key).await.unwrap_or_else(|e| panic!("{label} get: {e}"));
    assert_eq!(got.as_deref(), Some(entry), "{label}: get answers the entry byte for byte");
    if let Some(found) = probe(backend, wire, label) {
        assert_eq!(found.as_deref(), Some(entry), "{label}: the raw probe of the wire bytes finds the entry");
    }
    sentinel_intact(context, backend, label, 2);
    assert!(store.delete(key).await.unwrap_or_else(|e| panic!("{label} delete: {e}")), "{label}: delete deleted");
    assert!(
        matches!(probe(backend, wire, label), None | Some(None)),
        "{label}: the raw probe finds nothing after delete"
    );
    let after = store.get(key).await.unwrap_or_else(|e| panic!("{label} get after delete: {e}"));
    assert_eq!(after, None, "{label}: get after delete is a miss");
}

/// What a raw probe of `wire` finds: `None` for a backend checked through the store only, else the value found.
fn probe(backend: &Backend, wire: &[u8], label: &str) -> Option<Option<Vec<u8>>> {
    match backend {
        Backend::Memory | Backend::Sqlite => None,
        Backend::Memcached(address) => Some(memcached_get(address, wire).unwrap_or_else(|e| panic!("{label} mg: {e}"))),
        Backend::Redis(address) => match redis(address, &[b"GET", wire]).unwrap_or_else(|e| panic!("{label} GET: {e}"))
        {
            Resp::Bulk(value) => Some(value),
            other => panic!("{label}: GET answered {other:?}"),
        },
        Backend::File(root) => Some(file_value(root, wire, label)),
    }
}

/// The file store's file for stored key `wire` (spec/STORES.md §7): `<root>/<h[0..2]>/<h[2..4]>/<h>`, `h` the
/// SHA-256 of the wire bytes; its value, once its header's key is found to be exactly those bytes.
fn file_value(root: &Path, wire: &[u8], label: &str) -> Option<Vec<u8>> {
    let h = hex::encode(Sha256::digest(wire));
    let path = root.join(&h[..2]).join(&h[2..4]).join(&h);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("{label}: {}: {e}", path.display()),
    };
    assert!(bytes.len() >= 14 && &bytes[..4] == b"LDR1", "{label}: {} is not a store file", path.display());
    let length = usize::from(u16::from_le_bytes([bytes[12], bytes[13]]));
    assert_eq!(bytes.get(14..14 + length), Some(wire), "{label}: the file header's key is the wire bytes");
    Some(bytes[14 + length..].to_vec())
}

/// On memcached and Redis, the sentinel still answers its value, and Redis holds `keys` keys.
fn sentinel_intact(context: &Context, backend: &Backend, label: &str, keys: i64) {
    let (key, value) = &context.sentinel;
    match backend {
        Backend::Memcached(address) => {
            let got = memcached_get(address, key.as_bytes()).unwrap_or_else(|e| panic!("{label} mg sentinel: {e}"));
            assert_eq!(got.as_ref(), Some(value), "{label}: the sentinel is intact");
        }
        Backend::Redis(address) => {
            let got = redis(address, &[b"GET", key.as_bytes()]).unwrap_or_else(|e| panic!("{label} GET sentinel: {e}"));
            assert_eq!(got, Resp::Bulk(Some(value.clone())), "{label}: the sentinel is intact");
            let size = redis(address, &[b"DBSIZE"]).unwrap_or_else(|e| panic!("{label} DBSIZE: {e}"));
            assert_eq!(size, Resp::Integer(keys), "{label}: DBSIZE");
        }
        _ => {}
    }
}

// --- raw probes: this runner's own socket code --------------------------------------------------------------------

fn connect(address: &str) -> Result<TcpStream, String> {
    let stream = TcpStream::connect(address).map_err(|e| format!("connect {address}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    Ok(stream)
}

fn read_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(|e| format!("read: {e}"))?;
    let text = line.strip_suffix(b"\r\n").ok_or_else(|| format!("a line not ended by CR LF: {line:?}"))?;
    Ok(String::from_utf8_lossy(text).into_owned())
}

/// A memcached request whose answer is one line.
fn memcached_line(address: &str, request: &[u8]) -> Result<String, String> {
    let mut stream = connect(address)?;
    stream.write_all(request).map_err(|e| e.to_string())?;
    read_line(&mut BufReader::new(stream))
}

/// `mg <wire bytes> v`: the value (`VA <n>` and its bytes), or `None` for `EN`.
fn memcached_get(address: &str, wire: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut stream = connect(address)?;
    stream.write_all(&[b"mg ".as_slice(), wire, b" v\r\n"].concat()).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let line = read_line(&mut reader)?;
    if line == "EN" {
        return Ok(None);
    }
    let size: usize = line
        .strip_prefix("VA ")
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .ok_or_else(|| format!("mg answered {line:?}"))?;
    let mut value = vec![0; size + 2];
    reader.read_exact(&mut value).map_err(|e| e.to_string())?;
    value.truncate(size);
    Ok(Some(value))
}

#[derive(Debug, PartialEq, Eq)]
enum Resp {
    Status(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
}

/// One Redis command (an array of bulk strings) and its reply.
fn redis(address: &str, args: &[&[u8]]) -> Result<Resp, String> {
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        request.extend_from_slice(arg);
        request.extend_from_slice(b"\r\n");
    }
    let mut stream = connect(address)?;
    stream.write_all(&request).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let line = read_line(&mut reader)?;
    let number = |text: &str| text.parse::<i64>().map_err(|_| format!("Redis answered {line:?}"));
    match line.split_at(1.min(line.len())) {
        ("+", status) => Ok(Resp::Status(status.to_owned())),
        (":", n) => Ok(Resp::Integer(number(n)?)),
        ("$", "-1") => Ok(Resp::Bulk(None)),
        ("$", n) => {
            let size = usize::try_from(number(n)?).map_err(|e| e.to_string())?;
            let mut value = vec![0; size + 2];
            reader.read_exact(&mut value).map_err(|e| e.to_string())?;
            value.truncate(size);
            Ok(Resp::Bulk(Some(value)))
        }
        _ => Err(format!("Redis answered {line:?}")),
    }
}
