//! PostgreSQL in a temporary data directory on a loopback port. PostgreSQL refuses to run as root, so when the
//! tests run as root the server runs as Debian's `postgres` user (`runuser`), which owns the directory.

use std::path::PathBuf;
use std::process::Command;

use crate::process::{find_binary, free_port, Server, TestkitError};

const BIN_DIRS: &[&str] = &["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"];

/// A PostgreSQL server with a `larder` superuser (trust authentication on loopback) and its `postgres` database.
pub struct Postgres {
    server: Option<Server>,
    port: u16,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

impl Postgres {
    pub fn start() -> Result<Postgres, TestkitError> {
        let dir = tempfile::Builder::new()
            .prefix("larder-pg-")
            .tempdir()
            .map_err(|e| TestkitError(format!("postgres: temporary directory: {e}")))?;
        let data = dir.path().join("data");
        std::fs::create_dir(&data).map_err(|e| TestkitError(format!("postgres: {e}")))?;
        if is_root() {
            run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()), "chown")?;
        }
        let initdb = find_binary("initdb", "postgresql", BIN_DIRS)?;
        let mut command = as_postgres(&initdb);
        command.arg("-D").arg(&data).args(["-A", "trust", "-U", "larder", "--no-sync", "-E", "UTF8", "--locale=C"]);
        run(&mut command, "initdb")?;
        let mut postgres = Postgres { server: None, port: free_port(), data, _dir: dir };
        postgres.launch()?;
        Ok(postgres)
    }

    fn launch(&mut self) -> Result<(), TestkitError> {
        let binary = find_binary("postgres", "postgresql", BIN_DIRS)?;
        let mut command = as_postgres(&binary);
        command.arg("-D").arg(&self.data).args(["-p", &self.port.to_string(), "-k"]).arg(&self.data);
        command.args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off"]);
        command.args(["-c", "full_page_writes=off", "-c", "max_connections=200"]);
        self.server = Some(Server::spawn("postgres", command, self.port)?);
        self.wait_for_sessions()
    }

    /// PostgreSQL listens before it accepts sessions (a client then reads "the database system is starting up"):
    /// waits until `pg_isready` says it accepts them.
    fn wait_for_sessions(&self) -> Result<(), TestkitError> {
        let ready = find_binary("pg_isready", "postgresql", BIN_DIRS)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let status = Command::new(&ready)
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "larder", "-d", "postgres"])
                .status()
                .map_err(|e| TestkitError(format!("pg_isready: {e}")))?;
            if status.success() {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(TestkitError(format!(
                    "postgres on port {} did not accept sessions within 20 s",
                    self.port
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://larder@127.0.0.1:port/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://larder@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server (a fast shutdown, signalled to the postmaster itself: the process started may be `runuser`,
    /// which does not pass signals on) and waits until it is gone.
    pub fn stop(&mut self) {
        let Some(mut server) = self.server.take() else { return };
        let pid = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().map(str::trim).map(str::to_owned));
        if let Some(pid) = pid {
            let _ = Command::new("kill").args(["-INT", &pid]).status();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            while std::path::Path::new(&format!("/proc/{pid}")).exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        server.stop();
    }

    /// Stops and starts the server on the same port, keeping its data.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.launch()
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn as_postgres(binary: &str) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", binary]);
        command
    } else {
        Command::new(binary)
    }
}

fn run(command: &mut Command, what: &str) -> Result<(), TestkitError> {
    let output = command.output().map_err(|e| TestkitError(format!("{what}: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(TestkitError(format!("{what} failed: {}", String::from_utf8_lossy(&output.stderr))))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
