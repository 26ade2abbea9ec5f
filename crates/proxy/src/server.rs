//! Listening: the main and admin listeners, HTTP/1.1 with keep-alive (and HTTP/2 over cleartext for clients that
//! speak it), the connection limit, and graceful shutdown: stop accepting, let in-flight requests finish, then
//! stop. Each connection's deadlines are in connection.rs.
//!
//! Two ways to run. [`Server::run`] serves on the caller's runtime (tests, `larder demo`). [`Server::run_per_core`]
//! gives each core a single-threaded runtime with its own `SO_REUSEPORT` listener, so a request is accepted,
//! served and answered on one thread without cross-thread wake-ups (nginx's model; measured in
//! docs/benchmarks.md), and the admin API a thread of its own, so a long purge or a large push never stalls a core
//! that serves hits. The proxy state (store, coalescer, metrics) is shared by all of them.
//!
//! `SO_REUSEPORT` would also let a second larder bind the same port and silently split the traffic (and the
//! cache) in two, so before binding, a plain socket checks that nobody listens there yet.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use larder_store::{Clock, Store};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::admin::Admin;
use crate::config::{ConfigError, ProxyConfig};
use crate::connection::{self, ConnState, RequestGuard, Timeouts, Tracked};
use crate::handler::Proxy;
use crate::per_client::PerClient;

/// Connections the admin API serves at once.
const ADMIN_CONNECTIONS: usize = 256;

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
    #[error("cannot listen on {addr}: another program (another larder?) is listening there")]
    InUse { addr: SocketAddr },
    #[error("cannot start worker threads: {0}")]
    Runtime(std::io::Error),
}

impl<S: Store> Server<S> {
    /// Validates the configuration and binds both listeners (port 0 picks a free port; see `local_addr`).
    pub fn bind(config: ProxyConfig, store: S, clock: Arc<dyn Clock>) -> Result<Server<S>, ServeError> {
        let proxy = Arc::new(Proxy::new(&config, store, clock)?);
        ensure_free(config.listen)?;
        if let Some(addr) = config.admin {
            ensure_free(addr)?;
        }
        let listener = listen(config.listen)?;
        let admin = match config.admin {
            Some(addr) => {
                let listener = listen(addr)?;
                let bound = listener.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
                Some((listener, Arc::new(Admin::new(proxy.clone(), config.admin_token()?, bound))))
            }
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
        let main =
            tokio::spawn(serve_main(self.proxy.clone(), self.listener, self.config.clone(), permits, stop_rx.clone()));
        let admin = self
            .admin
            .map(|(listener, admin)| tokio::spawn(serve_admin(admin, listener, self.config.clone(), stop_rx)));
        shutdown.await;
        let _ = stop_tx.send(true);
        let _ = main.await;
        if let Some(admin) = admin {
            let _ = admin.await;
        }
    }

    /// Serves with `threads` single-threaded runtimes (0 = one per core), each accepting on its own
    /// `SO_REUSEPORT` socket, and the admin API on a thread of its own, until `shutdown` completes; then drains and
    /// returns. Blocks the calling thread, which must not be inside a runtime.
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
        let mut workers = Vec::with_capacity(threads + 1);
        let runtime =
            || tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServeError::Runtime);
        for (index, listener) in listeners.into_iter().enumerate() {
            let rt = runtime()?;
            let (proxy, config, permits, stop_rx) =
                (self.proxy.clone(), self.config.clone(), permits.clone(), stop_rx.clone());
            let worker = std::thread::Builder::new()
                .name(format!("larder-worker-{index}"))
                .spawn(move || rt.block_on(serve_main(proxy, listener, config, permits, stop_rx)))
                .map_err(ServeError::Runtime)?;
            workers.push(worker);
        }
        if let Some((listener, admin)) = self.admin {
            let rt = runtime()?;
            let (config, stop_rx) = (self.config.clone(), stop_rx.clone());
            let worker = std::thread::Builder::new()
                .name("larder-admin".into())
                .spawn(move || rt.block_on(serve_admin(admin, listener, config, stop_rx)))
                .map_err(ServeError::Runtime)?;
            workers.push(worker);
        }
        let signal = runtime()?;
        signal.block_on(shutdown);
        let _ = stop_tx.send(true);
        for worker in workers {
            let _ = worker.join();
        }
        Ok(())
    }
}

/// Refuses to start on a port something else already listens on (another larder, say): `SO_REUSEPORT` would
/// otherwise let both run, each with half the traffic. A plain socket (without `SO_REUSEPORT`) cannot bind a port
/// that any socket listens on, so binding one and closing it again is the check. Port 0 picks a free port anyway.
fn ensure_free(addr: SocketAddr) -> Result<(), ServeError> {
    if addr.port() == 0 {
        return Ok(());
    }
    match std::net::TcpListener::bind(addr) {
        Ok(probe) => {
            drop(probe);
            Ok(())
        }
        Err(source) if source.kind() == std::io::ErrorKind::AddrInUse => Err(ServeError::InUse { addr }),
        Err(source) => Err(ServeError::Bind { addr, source }),
    }
}

/// A listening socket that other sockets of this process may share (`SO_REUSEPORT`), so every worker thread can
/// have its own.
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

/// The HTTP settings every connection gets (`timeouts.header`: the longest a request head may take).
fn http_builder(config: &ProxyConfig, timeouts: &Timeouts) -> Arc<auto::Builder<TokioExecutor>> {
    let limits = &config.limits;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_pending_accept_reset_streams(Some(20))
        .max_local_error_reset_streams(Some(1024));
    Arc::new(builder)
}

fn timeouts(config: &ProxyConfig) -> Timeouts {
    let limits = &config.limits;
    Timeouts {
        header: Duration::from_secs(limits.header_read_timeout_secs),
        idle: Duration::from_secs(limits.idle_timeout_secs),
        grace: Duration::from_secs(limits.shutdown_grace_secs),
    }
}

/// The admin API's deadlines: a request head, and a connection with no request under way, get
/// `admin_idle_timeout_secs` (seconds, not the main listener's minute), so connections that send nothing, or
/// idle after a request, cannot hold its slots.
fn admin_timeouts(config: &ProxyConfig) -> Timeouts {
    let short = Duration::from_secs(config.limits.admin_idle_timeout_secs);
    let main = timeouts(config);
    Timeouts { header: main.header.min(short), idle: main.idle.min(short), grace: main.grace }
}

/// Accepts and serves client connections on the current runtime until told to stop, then drains them.
async fn serve_main<S: Store>(
    proxy: Arc<Proxy<S>>,
    listener: std::net::TcpListener,
    config: ProxyConfig,
    permits: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
) {
    let slots = config.limits.max_upstream_per_connection;
    let make = move |remote: SocketAddr, state: &Arc<ConnState>| {
        let (proxy, state) = (proxy.clone(), state.clone());
        service_fn(move |request| {
            let (proxy, state) = (proxy.clone(), state.clone());
            async move {
                let guard = RequestGuard::new(&state);
                let served = proxy.handle(request, remote, &state.upstream_slots).await;
                let (parts, body) = served.response.into_parts();
                let log = match (proxy.access_log(), served.record) {
                    (Some(sink), Some(record)) => Some((sink.clone(), record, parts.status.as_u16(), served.verdict)),
                    _ => None,
                };
                Ok::<_, Infallible>(http::Response::from_parts(parts, Tracked::new(body, Some(guard), log)))
            }
        })
    };
    let timeouts = timeouts(&config);
    accept(listener, &config, timeouts, permits, None, slots, stop, make).await;
}

/// Serves the admin API on the current runtime until told to stop.
async fn serve_admin<S: Store>(
    admin: Arc<Admin<S>>,
    listener: std::net::TcpListener,
    config: ProxyConfig,
    stop: watch::Receiver<bool>,
) {
    let make = move |_: SocketAddr, state: &Arc<ConnState>| {
        let (admin, state) = (admin.clone(), state.clone());
        service_fn(move |request| {
            let (admin, state) = (admin.clone(), state.clone());
            async move {
                let guard = RequestGuard::new(&state);
                let response = admin.handle(request).await;
                let (parts, body) = response.into_parts();
                Ok::<_, Infallible>(http::Response::from_parts(parts, Tracked::new(body, Some(guard), None)))
            }
        })
    };
    let per_client = Some(PerClient::new(config.limits.admin_connections_per_client));
    let timeouts = admin_timeouts(&config);
    accept(listener, &config, timeouts, Arc::new(Semaphore::new(ADMIN_CONNECTIONS)), per_client, 1, stop, make).await;
}

/// Accepts connections while permits last (the rest wait in the backlog) and until told to stop; then waits for
/// the connections to drain, up to the grace period. With `per_client`, a client address past its share is
/// answered 503 and closed at once (per_client.rs).
#[allow(clippy::too_many_arguments)]
async fn accept<F, Svc>(
    listener: std::net::TcpListener,
    config: &ProxyConfig,
    timeouts: Timeouts,
    permits: Arc<Semaphore>,
    per_client: Option<PerClient>,
    upstream_slots: usize,
    mut stop: watch::Receiver<bool>,
    make_service: F,
) where
    F: Fn(SocketAddr, &Arc<ConnState>) -> Svc,
    Svc: hyper::service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Tracked>,
            Error = Infallible,
        > + Send
        + 'static,
    Svc::Future: Send + 'static,
{
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "cannot use the listening socket");
            return;
        }
    };
    let builder = http_builder(config, &timeouts);
    // Every connection holds a receiver; when all are gone, the connections have drained.
    let (alive_tx, alive_rx) = watch::channel(());
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stop.changed() => break,
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
            _ = stop.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let share = match &per_client {
            Some(per_client) => match per_client.admit(remote.ip()) {
                Some(share) => Some(share),
                None => {
                    per_client.refuse(&stream, remote.ip());
                    continue;
                }
            },
            None => None,
        };
        let state = ConnState::new(upstream_slots);
        let service = make_service(remote, &state);
        let (builder, stop, alive) = (builder.clone(), stop.clone(), alive_rx.clone());
        tokio::spawn(async move {
            connection::drive(stream, builder, service, state, timeouts, stop).await;
            drop(share);
            drop(alive);
            drop(permit);
        });
    }
    drop(listener);
    drop(alive_rx);
    if tokio::time::timeout(timeouts.grace + Duration::from_secs(1), alive_tx.closed()).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {:?}; closing", timeouts.grace);
    }
}
