//! `larder bench memory`: the in-process cache workload of the source post (004) — a million entries with keys
//! "1".."1000000" and small MessagePack values — on larder's memory store and on moka and quick_cache, measured the
//! same way: resident memory growth, bookkeeping per entry, insert rate, get rates and a 90/10 read/write mix.
//!
//! Each contender runs in its own process (the CLI re-executes itself), so resident memory is not muddied by what
//! an earlier contender left in the allocator.

use std::hint::black_box;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use larder_store::MemoryStore;
use serde::{Deserialize, Serialize};

use crate::data::key_indices;

/// The caches compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Contender {
    Larder,
    Moka,
    QuickCache,
}

impl Contender {
    pub const ALL: [Contender; 3] = [Contender::Larder, Contender::Moka, Contender::QuickCache];

    pub fn name(self) -> &'static str {
        match self {
            Contender::Larder => "larder",
            Contender::Moka => "moka",
            Contender::QuickCache => "quick_cache",
        }
    }
}

impl FromStr for Contender {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Contender::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| format!("unknown contender {s:?}"))
    }
}

/// Everything measured for one contender.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryFigures {
    pub contender: Contender,
    pub entries: usize,
    pub key_bytes: usize,
    pub value_bytes: usize,
    pub rss_growth_bytes: u64,
    /// Resident bytes per entry beyond its key and value.
    pub bookkeeping_per_entry: f64,
    pub inserts_per_s: f64,
    pub gets_per_s_1_thread: f64,
    pub gets_per_s_2_threads: f64,
    pub zipf_gets_per_s_2_threads: f64,
    pub mix_90_10_ops_per_s_2_threads: f64,
}

/// The operations every contender offers, each as its users would call it (owned keys and values where the API
/// takes ownership).
trait Contestant: Sync {
    fn insert(&self, key: &str, value: &[u8]);
    fn get(&self, key: &str) -> bool;
}

impl Contestant for MemoryStore {
    fn insert(&self, key: &str, value: &[u8]) {
        let _ = self.set_now(key, value, None);
    }
    fn get(&self, key: &str) -> bool {
        black_box(self.get_now(key)).is_some()
    }
}

impl Contestant for moka::sync::Cache<String, Bytes> {
    fn insert(&self, key: &str, value: &[u8]) {
        moka::sync::Cache::insert(self, key.to_owned(), Bytes::copy_from_slice(value));
    }
    fn get(&self, key: &str) -> bool {
        black_box(moka::sync::Cache::get(self, key)).is_some()
    }
}

#[derive(Clone)]
struct ByteWeighter;

impl quick_cache::Weighter<String, Bytes> for ByteWeighter {
    fn weight(&self, key: &String, value: &Bytes) -> u64 {
        (key.len() + value.len()) as u64
    }
}

impl Contestant for quick_cache::sync::Cache<String, Bytes, ByteWeighter> {
    fn insert(&self, key: &str, value: &[u8]) {
        quick_cache::sync::Cache::insert(self, key.to_owned(), Bytes::copy_from_slice(value));
    }
    fn get(&self, key: &str) -> bool {
        black_box(quick_cache::sync::Cache::get(self, key)).is_some()
    }
}

/// A link record like the one 004 caches, as MessagePack: about 200 bytes.
pub fn sample_value() -> Vec<u8> {
    #[derive(Serialize)]
    struct Link<'a> {
        id: u64,
        slug: &'a str,
        long_url: &'a str,
        title: &'a str,
        clicks: u64,
        inserted_at: &'a str,
        updated_at: &'a str,
    }
    let link = Link {
        id: 41_725,
        slug: "a1b2c3",
        long_url: "https://www.example.com/articles/2016/05/elixir-genserver-ets-cache-for-phoenix-redirects",
        title: "Caching with GenServer and ETS",
        clicks: 90_210,
        inserted_at: "2016-05-12T10:30:00Z",
        updated_at: "2016-05-12T10:30:00Z",
    };
    rmp_serde::to_vec_named(&link).unwrap_or_default()
}

/// Resident set size of this process, from /proc/self/statm (Linux).
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// Runs every measurement for `contender` in this process.
pub fn measure(contender: Contender, entries: usize, phase: Duration) -> Result<MemoryFigures, String> {
    let keys: Vec<String> = (1..=entries).map(|i| i.to_string()).collect();
    let value = sample_value();
    let uniform = key_indices(entries, 1 << 22, 0xACCE55, None);
    let zipf = key_indices(entries, 1 << 22, 0x21FF, Some(0.99));
    let capacity = 64u64 << 30;
    let before = resident_bytes();
    let (store, inserts_per_s): (Box<dyn Contestant>, f64) = match contender {
        Contender::Larder => {
            let store = MemoryStore::builder()
                .capacity_bytes(capacity as usize)
                .max_entry_fraction(1.0 / 64.0)
                .build()
                .unwrap_or_else(|e| panic!("benchmark store config: {e}"));
            let rate = fill(&store, &keys, &value);
            (Box::new(store), rate)
        }
        Contender::Moka => {
            let cache = moka::sync::Cache::builder()
                .max_capacity(capacity)
                .weigher(|k: &String, v: &Bytes| (k.len() + v.len()) as u32)
                .build();
            let rate = fill(&cache, &keys, &value);
            cache.run_pending_tasks();
            (Box::new(cache), rate)
        }
        Contender::QuickCache => {
            let cache = quick_cache::sync::Cache::with_weighter(entries, capacity, ByteWeighter);
            let rate = fill(&cache, &keys, &value);
            (Box::new(cache), rate)
        }
    };
    let growth = resident_bytes().saturating_sub(before);
    let step = (entries / 1000).max(1);
    let missing = keys.iter().step_by(step).filter(|k| !store.get(k)).count();
    if missing > 0 {
        return Err(format!("{}: {missing} sampled keys missing after the fill", contender.name()));
    }
    let key_bytes: usize = keys.iter().map(String::len).sum();
    let payload = key_bytes + entries * value.len();
    let store = &*store;
    let gets_1 = run_threads(1, phase, |t, stop| get_loop(store, &keys, &uniform, t, stop));
    let gets_2 = run_threads(2, phase, |t, stop| get_loop(store, &keys, &uniform, t, stop));
    let zipf_2 = run_threads(2, phase, |t, stop| get_loop(store, &keys, &zipf, t, stop));
    let mix_2 = run_threads(2, phase, |t, stop| mix_loop(store, &keys, &uniform, &value, t, stop));
    Ok(MemoryFigures {
        contender,
        entries,
        key_bytes,
        value_bytes: value.len(),
        rss_growth_bytes: growth,
        bookkeeping_per_entry: (growth as f64 - payload as f64) / entries as f64,
        inserts_per_s,
        gets_per_s_1_thread: gets_1,
        gets_per_s_2_threads: gets_2,
        zipf_gets_per_s_2_threads: zipf_2,
        mix_90_10_ops_per_s_2_threads: mix_2,
    })
}

/// Inserts every key once, in order, on this thread; returns inserts per second.
fn fill(store: &dyn Contestant, keys: &[String], value: &[u8]) -> f64 {
    let start = Instant::now();
    for key in keys {
        store.insert(key, value);
    }
    keys.len() as f64 / start.elapsed().as_secs_f64()
}

/// Runs `work` on `threads` threads for `phase`; returns total operations per second.
fn run_threads(threads: usize, phase: Duration, work: impl Fn(usize, &AtomicBool) -> u64 + Sync) -> f64 {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (stop, total, work) = (&stop, &total, &work);
            scope.spawn(move || total.fetch_add(work(t, stop), Ordering::Relaxed));
        }
        std::thread::sleep(phase);
        stop.store(true, Ordering::Relaxed);
    });
    total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Reads keys in `order` (each thread from its own offset) until stopped, in batches between checks of the flag.
fn get_loop(store: &dyn Contestant, keys: &[String], order: &[u32], thread: usize, stop: &AtomicBool) -> u64 {
    let mut i = thread * order.len() / 2;
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1024 {
            black_box(store.get(&keys[order[i % order.len()] as usize]));
            i += 1;
        }
        ops += 1024;
    }
    ops
}

/// 90% reads, 10% writes of existing keys.
fn mix_loop(
    store: &dyn Contestant,
    keys: &[String],
    order: &[u32],
    value: &[u8],
    thread: usize,
    stop: &AtomicBool,
) -> u64 {
    let mut i = thread * order.len() / 2;
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1024 {
            let key = &keys[order[i % order.len()] as usize];
            if i.is_multiple_of(10) {
                store.insert(key, value);
            } else {
                black_box(store.get(key));
            }
            i += 1;
        }
        ops += 1024;
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_value_is_about_200_bytes_of_msgpack() {
        let v = sample_value();
        assert!((180..=240).contains(&v.len()), "{}", v.len());
        assert_eq!(v[0] & 0xf0, 0x80, "a MessagePack map");
    }

    #[test]
    fn zipf_indices_favour_a_few_keys() {
        let order = key_indices(10_000, 100_000, 1, Some(0.99));
        let mut counts = vec![0u32; 10_000];
        for i in &order {
            counts[*i as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top_100: u32 = counts[..100].iter().sum();
        assert!(top_100 > 40_000, "the hottest 1% of keys draw {top_100} of 100,000 reads");
    }

    #[test]
    fn every_contender_stores_and_finds_keys() {
        for contender in Contender::ALL {
            let figures = measure(contender, 2_000, Duration::from_millis(20)).expect("every key found");
            assert!(figures.inserts_per_s > 0.0 && figures.gets_per_s_2_threads > 0.0, "{contender:?}");
        }
    }
}
