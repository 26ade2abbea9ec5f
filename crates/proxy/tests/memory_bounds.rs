//! Memory stays bounded whatever the upstream sends: many concurrent fills of responses too large to store do not
//! buffer them whole, and a small compressed body that decodes to hundreds of megabytes is never decoded for
//! clients. Measured with a counting allocator, which is why this file holds a single test: other tests in the
//! same binary would share the counter.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use support::{Larder, Origin};

struct CountingAllocator;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const MIB: usize = 1 << 20;

/// Peak bytes allocated above where we started, while `work` runs.
async fn peak_during<F: std::future::Future<Output = ()>>(work: F) -> usize {
    let baseline = CURRENT.load(Ordering::SeqCst);
    PEAK.store(baseline, Ordering::SeqCst);
    work.await;
    PEAK.load(Ordering::SeqCst).saturating_sub(baseline)
}

/// GETs `url` and counts its body without keeping it (so the client itself adds nothing to the peak).
async fn fetch_counting(url: String, accept_encoding: Option<&'static str>) -> (StatusCode, usize, Option<String>) {
    let client: hyper_util::client::legacy::Client<_, Empty<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let mut request = http::Request::get(url);
    if let Some(value) = accept_encoding {
        request = request.header("accept-encoding", value);
    }
    let response =
        tokio::time::timeout(Duration::from_secs(60), client.request(request.body(Empty::new()).expect("r")))
            .await
            .expect("answered within a minute")
            .expect("a response");
    let status = response.status();
    let detail = response.headers().get("cache-status").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let mut body = response.into_body();
    let mut length = 0;
    while let Some(Ok(frame)) = body.frame().await {
        length += frame.data_ref().map_or(0, Bytes::len);
    }
    (status, length, detail)
}

/// A gzip body of `zeros` zero bytes, made without holding them all.
fn gzip_of_zeros(zeros: usize) -> Bytes {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; MIB];
    for _ in 0..zeros / MIB {
        encoder.write_all(&chunk).expect("compress");
    }
    Bytes::from(encoder.finish().expect("compressed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_under_large_fills_and_compression_bombs() {
    // 1. Forty concurrent fills of 7 MB cacheable pages, with 64 MiB of cache (entries up to 4 MiB): each is too
    //    large to store, so each must stream through instead of being buffered whole.
    let page = Bytes::from(vec![b'p'; 7 * MIB]);
    let origin =
        Origin::start(move |_| (StatusCode::OK, vec![("cache-control", "max-age=600".into())], page.clone())).await;
    let larder = Larder::start(&origin.url(), |c| c.cache.capacity_bytes = 64 * MIB).await;
    let peak = peak_during(async {
        let fills: Vec<_> =
            (0..40).map(|i| tokio::spawn(fetch_counting(larder.url(&format!("/big/{i}")), None))).collect();
        for fill in fills {
            let (status, length, _) = fill.await.expect("task");
            assert_eq!((status, length), (StatusCode::OK, 7 * MIB));
        }
    })
    .await;
    eprintln!("fills peak {} MiB", peak / MIB);
    assert!(peak < 120 * MIB, "40 large fills peaked at {} MiB above the start", peak / MIB);
    drop(larder);
    drop(origin);

    // 2. 200 MiB of zeros in about 200 KB of gzip, cacheable, asked for by ten clients that do not accept gzip.
    let bomb = gzip_of_zeros(200 * MIB);
    assert!(bomb.len() < 400 << 10);
    let origin = Origin::start(move |_| {
        let headers = vec![("cache-control", "max-age=600".into()), ("content-encoding", "gzip".into())];
        (StatusCode::OK, headers, bomb.clone())
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let peak = peak_during(async {
        let clients: Vec<_> = (0..10).map(|_| tokio::spawn(fetch_counting(larder.url("/bomb"), None))).collect();
        for client in clients {
            let (status, _, detail) = client.await.expect("task");
            assert_eq!(status, StatusCode::OK);
            assert!(detail.is_some_and(|d| d.contains("decoded-too-large")), "not stored");
        }
    })
    .await;
    eprintln!("bomb peak {} MiB", peak / MIB);
    assert!(peak < 64 * MIB, "ten requests for a compression bomb peaked at {} MiB above the start", peak / MIB);
}
