//! libCacheSim's published miss counts on its cloudPhysics sample (test/test_evictionAlgo.c at commit aa0fc40, cache
//! sizes 128 MiB to 1 GiB in 128 MiB steps), and a test that the reference policies reproduce them exactly when the
//! trace is at hand ($LARDER_TRACES, else $XDG_CACHE_HOME/larder/traces or ~/.cache/larder/traces; traces are never
//! in git, so without it the test says so and passes).

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::policies::Reference;
    use crate::trace::{self, TraceFormat};

    const ARC: [u64; 8] = [90252, 85861, 78168, 74297, 67381, 65685, 64439, 64772];
    const S3FIFO: [u64; 8] = [89307, 82387, 77041, 76791, 71300, 70343, 70455, 70355];
    const SIEVE: [u64; 8] = [91699, 86720, 78578, 76707, 69945, 66221, 64445, 64376];

    fn trace_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("LARDER_TRACES") {
            return Some(PathBuf::from(dir));
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(cache.join("larder/traces"))
    }

    #[test]
    fn reproduce_libcachesim_published_misses_on_cloudphysics() {
        let Some(path) = trace_dir().map(|d| d.join("cloudPhysicsIO.oracleGeneral.bin")).filter(|p| p.exists()) else {
            eprintln!("cloudPhysicsIO.oracleGeneral.bin not found: published-count check skipped");
            return;
        };
        let requests = trace::load(&path, TraceFormat::OracleGeneral).expect("reads the trace");
        for (reference, published) in [(Reference::Arc, ARC), (Reference::S3Fifo, S3FIFO), (Reference::Sieve, SIEVE)] {
            for (step, &expected) in published.iter().enumerate() {
                let capacity = (step as u64 + 1) * (128 << 20);
                let mut policy = reference.build(capacity);
                let hits = requests.iter().filter(|r| policy.access(r.key, u64::from(r.size.unwrap_or(1)))).count();
                let misses = requests.len() as u64 - hits as u64;
                assert_eq!(misses, expected, "{reference:?} at {} MiB", capacity >> 20);
            }
        }
    }
}
