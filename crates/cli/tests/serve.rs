//! `larder serve` as an operator runs it: signals drain instead of dropping requests, a second larder on the same
//! port refuses to start, and bad settings (flags, variables, the file) get one clear line.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

fn larder() -> Command {
    Command::new(env!("CARGO_BIN_EXE_larder"))
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("address")
}

/// Starts a slow app (each request takes `delay`) on a runtime of its own thread; returns its URL.
fn slow_app(delay: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let origin = larder_proxy::origin::Origin::start(delay, 8, 100, 0).await.expect("origin");
            tx.send(origin.url()).expect("send");
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("the app's URL")
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(upstream: &str, listen: SocketAddr) -> Running {
    let child = larder()
        .args(["serve", "--upstream", upstream, "--listen", &listen.to_string(), "--no-admin", "--workers", "1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("larder starts");
    let started = Instant::now();
    while TcpStream::connect(listen).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "larder did not listen on {listen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Running(child)
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").args(["-s", name, &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
}

#[test]
fn sighup_drains_requests_in_flight_then_stops() {
    let app = slow_app(Duration::from_millis(800));
    let listen = free_port();
    let mut running = serve(&app, listen);
    let mut stream = TcpStream::connect(listen).expect("connect");
    stream.write_all(b"GET /slow HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n").expect("write");
    std::thread::sleep(Duration::from_millis(200));
    signal(&running.0, "HUP");
    let mut answer = String::new();
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "the request in flight finished: {answer:?}");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = running.0.try_wait().expect("wait") {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "larder did not stop after SIGHUP");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "a clean stop: {status:?}");
}

#[test]
fn a_second_larder_on_the_same_port_refuses_to_start() {
    let app = slow_app(Duration::ZERO);
    let listen = free_port();
    let _first = serve(&app, listen);
    let mut second = larder()
        .args(["serve", "--upstream", &app, "--listen", &listen.to_string(), "--no-admin"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = second.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = second.kill();
            panic!("a second larder started on {listen} and would split the traffic and the cache");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = second.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains(&listen.to_string()) && stderr.contains("another"), "{stderr}");
}

#[test]
fn bad_settings_get_one_clear_line() {
    let config: PathBuf = std::env::temp_dir().join(format!("larder-serve-test-{}.toml", std::process::id()));
    std::fs::write(&config, "upstream = \"http://127.0.0.1:3000\"\n[cache]\ncapacity_bytes = \"-1M\"\n")
        .expect("write");
    type Case = (Vec<String>, Vec<(&'static str, &'static str)>, &'static str);
    let cases: Vec<Case> = vec![
        (vec!["--config".into(), config.display().to_string()], vec![], "negative"),
        (vec!["--upstream=http://a".into()], vec![("LARDER_CACHE_SET_COOKIE", "maybe")], "yes/no"),
        (vec!["--upstream=http://a".into(), "--capacity=12X".into()], vec![], "suffix"),
        (vec!["--upstream=http://a/?q=1".into()], vec![], "upstream"),
        (vec!["--upstream=http://a".into(), "--trusted-proxies=10.0.0.0/40".into()], vec![], "trusted_proxies"),
        (vec!["--upstream=http://a".into(), "--compress=lzma".into()], vec![], "use one of off, gzip, br, zstd"),
        (vec!["--upstream=http://a".into(), "--stale-if-error=5x".into()], vec![], "ms, s, m, h"),
        (vec!["--upstream=http://a".into(), "--no-admin".into(), "--l1=64M".into()], vec![], "give --store too"),
        (vec!["--upstream=http://a".into()], vec![], "--admin-token"),
    ];
    for (args, env, says) in cases {
        let output = larder().arg("serve").args(&args).envs(env.clone()).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("larder: ") && stderr.contains(says), "{args:?} {env:?}: {stderr}");
    }
    let _ = std::fs::remove_file(&config);
    let help = larder().args(["serve", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(support::lists_values(&help, "--compress", &["off", "gzip", "br", "zstd"]), "{help}");
    assert!(help.contains("LARDER_TRUSTED_PROXIES") && help.contains("--access-log"));
}

/// Issue 32, finding 6: `--admin-token` is readable by every local user in `/proc/PID/cmdline`. The token comes
/// from a file instead (`--admin-token-file`, `LARDER_ADMIN_TOKEN_FILE`, `admin_token_file`), and the help says
/// never to pass it as an argument.
#[test]
fn the_admin_token_comes_from_a_file_and_never_shows_in_the_process_list() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("admin-token");
    let token = "file-token-5d1f0c2a";
    std::fs::write(&token_file, format!("{token}\n")).expect("write");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let app = slow_app(Duration::ZERO);
    let (listen, admin) = (free_port(), free_port());
    let child = larder()
        .args(["serve", "--upstream", &app, "--listen", &listen.to_string(), "--admin", &admin.to_string()])
        .args(["--workers", "1", "--admin-token-file", &token_file.display().to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("larder starts");
    let running = Running(child);
    let started = Instant::now();
    while TcpStream::connect(admin).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "the admin API did not listen on {admin}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", running.0.id())).expect("cmdline");
    assert!(!String::from_utf8_lossy(&cmdline).contains(token), "the token is in the process list");
    let status = |authorization: &str| {
        let mut stream = TcpStream::connect(admin).expect("connect");
        let request = format!("GET /metrics HTTP/1.1\r\nhost: {admin}\r\n{authorization}connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).expect("write");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.get(9..12).unwrap_or("").to_owned()
    };
    assert_eq!(status(&format!("authorization: Bearer {token}\r\n")), "200", "the file's token, without its newline");
    assert_eq!(status(&format!("authorization: Bearer {token}x\r\n")), "401");
    assert_eq!(status(""), "401");
    drop(running);
    // A file that is empty, missing or writable by every user is refused at start, with one clear line.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").expect("write");
    let open = dir.path().join("open");
    std::fs::write(&open, token).expect("write");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let missing = dir.path().join("missing");
    for (file, says) in [(&empty, "is empty"), (&open, "writable by every user"), (&missing, "cannot read")] {
        let output = larder()
            .args(["serve", "--upstream=http://a", "--admin-token-file", &file.display().to_string()])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{file:?}: {stderr}");
        assert!(stderr.starts_with("larder: ") && stderr.contains(says), "{file:?}: {stderr}");
    }
    let both = larder()
        .args(["serve", "--upstream=http://a", "--admin-token=x", "--admin-token-file", &empty.display().to_string()])
        .output()
        .expect("runs");
    assert_eq!(both.status.code(), Some(2), "one token, not two");
    let help = larder().args(["serve", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout).replace('\n', " ");
    assert!(help.contains("--admin-token-file") && help.contains("LARDER_ADMIN_TOKEN_FILE"), "{help}");
    assert!(
        help.contains("Never pass the token itself as an argument") && help.contains("/proc/PID/cmdline"),
        "{help}"
    );
}
