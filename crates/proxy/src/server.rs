//! Listening: the main and admin listeners, HTTP/1.1 with keep-alive (and HTTP/2 over cleartext for clients that
//! speak it), the connection limit, the header-read timeout against slow clients, and graceful shutdown: stop
//! accepting, let in-flight requests finish, then stop.
//!
//! Two ways to run. [`Server::run`] serves on the caller's runtime (tests, `larder demo`). [`Server::run_per_core`]
//! gives each core a single-threaded runtime with its own `SO_REUSEPORT` listener, so a request is accepted,
//! served and answered on one thread without cross-thread wake-ups (nginx's model; measured in
//! docs/benchmarks.md). The proxy state (store, coalescer, metrics) is shared by all of them.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use larder_store::{Clock, Store};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::admin::Admin;
use crate::config::{ConfigError, ProxyConfig};
use crate::handler::Proxy;

/// A proxy with its listeners bound, ready to run.
pub struct Server<S> {
    proxy: Arc<Proxy<S>>,
    listener: std::net::TcpListener,
    admin: Option<(std::net::TcpListener, Arc<Admin<S>>)>,
    config: ProxyConfig,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot start worker threads: {0}")]
    Runtime(std::io::Error),
}

impl<S: Store> Server<S> {
    /// Validates the configuration and binds both listeners (port 0 picks a free port; see `local_addr`).
    pub fn bind(config: ProxyConfig, store: S, clock: Arc<dyn Clock>) -> Result<Server<S>, ServeError> {
        let proxy = Arc::new(Proxy::new(&config, store, clock)?);
        let listener = listen(config.listen)?;
        let admin = match config.admin {
            Some(addr) => Some((listen(addr)?, Arc::new(Admin::new(proxy.clone(), config.admin_token.clone())))),
            None => None,
        };
        Ok(Server { proxy, listener, admin, config })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    pub fn proxy(&self) -> &Arc<Proxy<S>> {
        &self.proxy
    }

    /// Serves on the current runtime until `shutdown` completes, then drains in-flight requests (up to the
    /// configured grace period).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(self.config.limits.max_connections));
        let serving =
            serve_listeners(self.proxy.clone(), self.listener, self.admin, self.config.clone(), permits, stop_rx);
        let serving = tokio::spawn(serving);
        shutdown.await;
        let _ = stop_tx.send(true);
        let _ = serving.await;
    }

    /// Serves with `threads` single-threaded runtimes (0 = one per core), each accepting on its own
    /// `SO_REUSEPORT` socket, until `shutdown` completes; then drains and returns. Blocks the calling thread,
    /// which must not be inside a runtime.
    pub fn run_per_core(
        self,
        threads: usize,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let addr =
            self.listener.local_addr().map_err(|source| ServeError::Bind { addr: self.config.listen, source })?;
        let mut listeners = vec![self.listener];
        for _ in 1..threads {
            listeners.push(listen(addr)?);
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        // One connection limit for the whole server, shared by every thread.
        let permits = Arc::new(Semaphore::new(self.config.limits.max_connections));
        let mut admin = self.admin;
        let mut workers = Vec::with_capacity(threads);
        for (index, listener) in listeners.into_iter().enumerate() {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServeError::Runtime)?;
            let (proxy, config, permits, stop_rx) =
                (self.proxy.clone(), self.config.clone(), permits.clone(), stop_rx.clone());
            let admin = admin.take();
            let worker = std::thread::Builder::new()
                .name(format!("larder-worker-{index}"))
                .spawn(move || runtime.block_on(serve_listeners(proxy, listener, admin, config, permits, stop_rx)))
                .map_err(ServeError::Runtime)?;
            workers.push(worker);
        }
        let signal = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServeError::Runtime)?;
        signal.block_on(shutdown);
        let _ = stop_tx.send(true);
        for worker in workers {
            let _ = worker.join();
        }
        Ok(())
    }
}

/// A listening socket that other sockets may share (`SO_REUSEPORT`), so every worker thread can have its own.
fn listen(addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    use socket2::{Domain, Socket, Type};
    let bind = || -> std::io::Result<std::net::TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        #[cfg(unix)]
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(4096)?;
        Ok(socket.into())
    };
    bind().map_err(|source| ServeError::Bind { addr, source })
}

/// Runs the accept loops for the main listener (and the admin one, if given) on the current runtime until told
/// to stop, then drains their connections.
async fn serve_listeners<S: Store>(
    proxy: Arc<Proxy<S>>,
    listener: std::net::TcpListener,
    admin: Option<(std::net::TcpListener, Arc<Admin<S>>)>,
    config: ProxyConfig,
    permits: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
) {
    let limits = &config.limits;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_read_timeout_secs))
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new()).max_header_list_size(limits.max_header_bytes as u32);
    let builder = Arc::new(builder);
    let graceful = Arc::new(GracefulShutdown::new());

    let main = match TcpListener::from_std(listener) {
        Ok(listener) => {
            let proxy = proxy.clone();
            Some(tokio::spawn(accept_loop(
                listener,
                builder.clone(),
                graceful.clone(),
                permits,
                stop.clone(),
                move |remote| {
                    let proxy = proxy.clone();
                    service_fn(move |request| {
                        let proxy = proxy.clone();
                        async move { Ok::<_, Infallible>(proxy.handle(request, remote).await) }
                    })
                },
            )))
        }
        Err(error) => {
            tracing::error!(%error, "cannot use the listening socket");
            None
        }
    };
    let admin = admin.and_then(|(listener, admin)| {
        let listener = TcpListener::from_std(listener).ok()?;
        let permits = Arc::new(Semaphore::new(256));
        Some(tokio::spawn(accept_loop(listener, builder.clone(), graceful.clone(), permits, stop.clone(), move |_| {
            let admin = admin.clone();
            service_fn(move |request| {
                let admin = admin.clone();
                async move { Ok::<_, Infallible>(admin.handle(request).await) }
            })
        })))
    });
    if let Some(main) = main {
        let _ = main.await;
    }
    if let Some(admin) = admin {
        let _ = admin.await;
    }
    let grace = Duration::from_secs(limits.shutdown_grace_secs);
    if let Ok(graceful) = Arc::try_unwrap(graceful) {
        if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
            tracing::warn!("in-flight requests did not finish within {grace:?}; closing");
        }
    }
}

/// Accepts connections while permits last (the rest wait in the backlog) and until told to stop.
async fn accept_loop<F, Svc>(
    listener: TcpListener,
    builder: Arc<auto::Builder<TokioExecutor>>,
    graceful: Arc<GracefulShutdown>,
    permits: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
    make_service: F,
) where
    F: Fn(SocketAddr) -> Svc,
    Svc: hyper::service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<crate::body::ProxyBody>,
            Error = Infallible,
        > + Send
        + 'static,
    Svc::Future: Send + 'static,
{
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = stop.changed() => return,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off briefly instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let connection = builder.serve_connection(TokioIo::new(stream), make_service(remote)).into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // Errors here are client disconnects and protocol violations, already answered where possible.
            let _ = connection.await;
            drop(permit);
        });
    }
}
