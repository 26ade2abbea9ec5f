//! A stand-in for a slow application server: a fixed pool of workers, each taking a fixed time per request (like
//! a Rails app's Unicorn or Puma workers), returning a page that may be cached. `larder demo` fronts it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// A running origin.
pub struct Origin {
    pub addr: SocketAddr,
    /// Requests it has answered.
    pub requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Origin {
    /// Starts an origin on a free loopback port with `workers` workers, each spending `delay` per request, that
    /// answers with a `page_bytes` HTML page cacheable for `max_age` seconds.
    pub async fn start(delay: Duration, workers: usize, page_bytes: usize, max_age: u64) -> std::io::Result<Origin> {
        Origin::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), delay, workers, page_bytes, max_age).await
    }

    /// As [`Origin::start`], listening on `addr`.
    pub async fn start_on(
        addr: SocketAddr,
        delay: Duration,
        workers: usize,
        page_bytes: usize,
        max_age: u64,
    ) -> std::io::Result<Origin> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let counter = requests.clone();
        let page = Bytes::from(page(page_bytes));
        let pool = Arc::new(tokio::sync::Semaphore::new(workers.max(1)));
        let task = tokio::spawn(async move {
            let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (counter, page, builder, pool) = (counter.clone(), page.clone(), builder.clone(), pool.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let (counter, page, pool) = (counter.clone(), page.clone(), pool.clone());
                        async move {
                            // A request waits for a free worker, then occupies it for the whole delay.
                            let _worker = pool.acquire_owned().await;
                            counter.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(delay).await;
                            let mut response = Response::new(Full::new(page));
                            *response.status_mut() = StatusCode::OK;
                            let h = response.headers_mut();
                            h.insert("content-type", http::HeaderValue::from_static("text/html; charset=utf-8"));
                            if let Ok(cc) = http::HeaderValue::from_str(&format!("max-age={max_age}")) {
                                h.insert("cache-control", cc);
                            }
                            if let Ok(path) = http::HeaderValue::from_str(request.uri().path()) {
                                h.insert("x-origin-path", path);
                            }
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(Origin { addr, requests, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A product page of about `bytes` bytes.
fn page(bytes: usize) -> String {
    let mut html = String::from("<!doctype html><html><head><title>Product</title></head><body><ul>\n");
    let mut i = 0;
    while html.len() + 24 < bytes {
        html.push_str(&format!("<li>item {i:06}</li>\n"));
        i += 1;
    }
    html.push_str("</ul></body></html>\n");
    html
}
