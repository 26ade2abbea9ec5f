//! Listening: the main and admin listeners, HTTP/1.1 with keep-alive (and HTTP/2 over cleartext for clients that
//! speak it), the connection limit, the header-read timeout against slow clients, and graceful shutdown: stop
//! accepting, let in-flight requests finish, then stop.

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
    listener: TcpListener,
    admin: Option<(TcpListener, Arc<Admin<S>>)>,
    config: ProxyConfig,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

impl<S: Store> Server<S> {
    /// Validates the configuration and binds both listeners (port 0 picks a free port; see `local_addr`).
    pub async fn bind(config: ProxyConfig, store: S, clock: Arc<dyn Clock>) -> Result<Server<S>, ServeError> {
        let proxy = Arc::new(Proxy::new(&config, store, clock)?);
        let listener = bind(config.listen).await?;
        let admin = match config.admin {
            Some(addr) => Some((bind(addr).await?, Arc::new(Admin::new(proxy.clone(), config.admin_token.clone())))),
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

    /// Serves until `shutdown` completes, then drains in-flight requests (up to the configured grace period).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let limits = &self.config.limits;
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
        let permits = Arc::new(Semaphore::new(limits.max_connections));

        let proxy = self.proxy.clone();
        let main =
            accept_loop(self.listener, builder.clone(), graceful.clone(), permits, stop_rx.clone(), move |remote| {
                let proxy = proxy.clone();
                service_fn(move |request| {
                    let proxy = proxy.clone();
                    async move { Ok::<_, Infallible>(proxy.handle(request, remote).await) }
                })
            });
        let admin = self.admin.map(|(listener, admin)| {
            let permits = Arc::new(Semaphore::new(256));
            accept_loop(listener, builder.clone(), graceful.clone(), permits, stop_rx.clone(), move |_| {
                let admin = admin.clone();
                service_fn(move |request| {
                    let admin = admin.clone();
                    async move { Ok::<_, Infallible>(admin.handle(request).await) }
                })
            })
        });
        let main = tokio::spawn(main);
        let admin = admin.map(tokio::spawn);
        shutdown.await;
        let _ = stop_tx.send(true);
        let _ = main.await;
        if let Some(admin) = admin {
            let _ = admin.await;
        }
        let grace = Duration::from_secs(self.config.limits.shutdown_grace_secs);
        if let Ok(graceful) = Arc::try_unwrap(graceful) {
            if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
                tracing::warn!("in-flight requests did not finish within {grace:?}; closing");
            }
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
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
