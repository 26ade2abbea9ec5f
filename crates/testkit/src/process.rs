//! Starting, waiting for and stopping a server process.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A server that would not start.
#[derive(Debug)]
pub struct TestkitError(pub String);

impl std::fmt::Display for TestkitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TestkitError {}

/// A port nothing listens on right now (the OS picks it; another process could take it before the server binds,
/// which [`Server::spawn`] reports as a start failure).
///
/// Never the same port twice in one process: tests run in parallel, and a server stopped by one test keeps its port
/// for its restart, so a port handed out once stays with that test. Otherwise a second server could be given a port
/// another test's server holds, fail to bind it, and look started because the other server answers there.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    for _ in 0..1000 {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0);
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if port != 0 && handed_out.insert(port) {
            return port;
        }
    }
    0
}

/// The path of `binary` (on PATH or in `extra_dirs`), or an error naming the Debian package to install.
pub(crate) fn find_binary(binary: &str, package: &str, extra_dirs: &[&str]) -> Result<String, TestkitError> {
    let path = std::env::var("PATH").unwrap_or_default();
    for dir in path.split(':').chain(extra_dirs.iter().copied()) {
        let candidate = Path::new(dir).join(binary);
        if candidate.is_file() {
            return Ok(candidate.to_string_lossy().into_owned());
        }
    }
    Err(TestkitError(format!(
        "{binary} not found: the tests need Debian's {package} package (run `make services`, or apt-get install {package})"
    )))
}

/// A running server process, stopped (SIGTERM, then SIGKILL) when dropped.
pub(crate) struct Server {
    child: Option<Child>,
    pub(crate) name: String,
}

impl Server {
    /// Runs `command` and waits until `port` on loopback accepts connections.
    pub(crate) fn spawn(name: &str, mut command: Command, port: u16) -> Result<Server, TestkitError> {
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let child = command.spawn().map_err(|e| TestkitError(format!("{name}: cannot start: {e}")))?;
        let mut server = Server { child: Some(child), name: name.to_owned() };
        server.wait_ready(port, Duration::from_secs(20))?;
        Ok(server)
    }

    fn wait_ready(&mut self, port: u16, within: Duration) -> Result<(), TestkitError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + within;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                // Something answers; make sure it is not another process on a port ours failed to bind (a server
                // that cannot bind exits at once).
                std::thread::sleep(Duration::from_millis(50));
                if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                    return Err(TestkitError(format!("{} exited ({status}): port {port} is taken", self.name)));
                }
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                    }
                    return Err(TestkitError(format!(
                        "{} exited ({status}) before listening on {port}: {stderr}",
                        self.name
                    )));
                }
            }
            if Instant::now() > deadline {
                return Err(TestkitError(format!("{} did not listen on {port} within {within:?}", self.name)));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the process and waits for it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
