//! Test harness: throwaway `redis-server` processes on free loopback ports.
//!
//! Every server binds 127.0.0.1 only, on a port picked free (never 6379),
//! with no persistence, in its own temporary directory, and is killed by pid
//! when its [`RedisServer`] is dropped, also when the test panics.
#![allow(dead_code)]

pub mod acl;
pub mod actor;
pub mod cluster;
pub mod every_kind;
pub mod every_synchronizer;
pub mod java;
pub mod monitor;
pub mod mutex;
pub mod proxy;
pub mod replicated;
pub mod sentinel;
pub mod state;
pub mod sync;
pub mod tls;
#[cfg(feature = "tls-rustls")]
pub mod tls_topo;
pub mod waiter;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;

/// A running `redis-server` owned by one test.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
}

/// The `redis-server` arguments every node of the tests runs with: loopback
/// only, no persistence, in the foreground, quiet.
const NODE_ARGS: [&str; 10] = [
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--daemonize",
    "no",
    "--loglevel",
    "warning",
];

static SERVERS: AtomicU32 = AtomicU32::new(0);

/// The server binary every harness (standalone, Sentinel, cluster) runs:
/// `$REDIS_SERVER`, else `redis-server` on the `PATH`. A `valkey-server`
/// works too (scripts/test.sh's Valkey stage).
fn redis_server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// The CLI that forms clusters (`--cluster create`): `$REDIS_CLI`, else
/// `redis-cli` on the `PATH` (a `valkey-cli` works too).
fn redis_cli_binary() -> String {
    std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".into())
}

fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("local addr").port();
        if port != 6379 {
            return port;
        }
    }
}

/// Whether process `pid` owns a socket listening on 127.0.0.1:`port`: the
/// listening socket's inode from `/proc/net/tcp` is among the process's fds.
fn listens_on(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return true; // not Linux: trust the connect
    };
    let local = format!("0100007F:{port:04X}");
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&"0A"))
                .then(|| format!("socket:[{}]", fields.get(9).copied().unwrap_or_default()))
        })
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            inodes
                .iter()
                .any(|inode| target.as_os_str() == inode.as_str())
        })
    })
}

/// The environment variable naming this test run: `scripts/test.sh`
/// exports a fresh value, and its exit trap (`reap_test_servers` in
/// scripts/lib.sh) kills only the servers whose directory carries it, never
/// another checkout's run on the same machine.
pub const RUN_ENV: &str = "REDISSON_LOCK_TEST_RUN";

/// A fresh directory name under the system's temporary directory for a
/// server, topology or certificate set: `redisson-lock-test-<run>-<pid>-<what>`,
/// `<run>` from [`RUN_ENV`] (`adhoc` outside scripts/test.sh, whose trap
/// then reaps nothing of it: the servers are stopped by pid as usual).
pub fn test_dir(what: &str) -> PathBuf {
    let run: String = std::env::var(RUN_ENV)
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let run = if run.is_empty() { "adhoc".into() } else { run };
    std::env::temp_dir().join(format!(
        "redisson-lock-test-{run}-{}-{what}",
        std::process::id()
    ))
}

impl RedisServer {
    /// Starts a server with default settings.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, e.g.
    /// `["--requirepass", "secret"]`.
    pub fn start_with(args: &[&str]) -> RedisServer {
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        let dir = test_dir(&n.to_string());
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        let mut server = RedisServer {
            child: None,
            port: 0,
            dir,
            extra_args: args.iter().map(|s| s.to_string()).collect(),
        };
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// Spawns the process on `self.port`; `false` if it did not come up.
    fn spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let child = Command::new(redis_server_binary())
            .args(["--port", &port, "--protected-mode", "yes"])
            .args(NODE_ARGS)
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) => panic!(
                "cannot run `{}` ({e}): install redis-server (apt-get install redis-server) \
                 or set REDIS_SERVER to its path",
                redis_server_binary()
            ),
        };
        match came_up(child, self.port) {
            Some(child) => {
                self.child = Some(child);
                true
            }
            None => false, // most likely the port was taken
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server running").id()
    }

    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain redis-rs connection for inspecting and poking the server.
    pub fn con(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("url");
        client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test server")
    }

    /// A fresh server and a client of it with the default settings.
    pub fn start_with_client() -> (RedisServer, Client) {
        let server = RedisServer::start();
        let client = server.client();
        (server, client)
    }

    /// [`start_with_client`](Self::start_with_client) with two clients: a
    /// holder's and a waiter's.
    pub fn start_with_two_clients() -> (RedisServer, Client, Client) {
        let server = RedisServer::start();
        let (holder, waiter) = (server.client(), server.client());
        (server, holder, waiter)
    }

    /// A client of this server with the default settings.
    pub fn client(&self) -> Client {
        connections(Client::builder(self.url()))
            .build()
            .expect("client")
    }

    /// A client of this server whose watchdog timeout (the lease of a hold
    /// without one) is `watchdog`.
    pub fn watchdog_client(&self, watchdog: Duration) -> Client {
        watchdog_client(&self.url(), watchdog)
    }

    /// Runs one command on a fresh connection.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.con()).expect("command")
    }

    /// Stops the server (SIGKILL: no persistence, nothing to save).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server and starts a new, empty one on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(Instant::now() < deadline, "could not restart redis-server");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes the server process (SIGSTOP); `resume` thaws it.
    pub fn pause(&self) {
        signal(self.pid(), "STOP");
    }

    /// Thaws a server frozen by [`pause`](Self::pause).
    pub fn resume(&self) {
        signal(self.pid(), "CONT");
    }

    /// Number of clients of the given `CLIENT LIST TYPE` (`normal`, `pubsub`).
    pub fn client_count(&self, kind: &str) -> usize {
        let list: String = self.cmd(&["CLIENT", "LIST", "TYPE", kind]);
        list.lines().filter(|line| !line.trim().is_empty()).count()
    }
}

/// A fresh directory for a topology of `kind` (its nodes' directories go
/// below it) with an empty pid file `pids`, and the reaper: a process that
/// kills every pid listed in that file and removes the directory and
/// `also_remove` once this test process is gone.
fn topology_dir(kind: &str, also_remove: &[&Path]) -> (PathBuf, Child) {
    let n = SERVERS.fetch_add(1, Ordering::Relaxed);
    let dir = test_dir(&format!("{kind}-{n}"));
    std::fs::create_dir_all(&dir).expect("create the topology's directory");
    let pids = dir.join("pids");
    std::fs::write(&pids, "").expect("pid file");
    let also: String = also_remove
        .iter()
        .map(|path| format!(" '{}'", path.display()))
        .collect();
    let reaper = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.3; done; \
             kill -9 $(cat '{file}') 2>/dev/null; rm -rf '{dir}'{also}",
            pid = std::process::id(),
            file = pids.display(),
            dir = dir.display(),
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the reaper");
    (dir, reaper)
}

/// Waits up to 10 s for a just-spawned `redis-server` to listen on `port`;
/// `None` (the process gone) if it exits first or does not come up. A
/// connect alone could reach another test's server that took the port
/// first (ours then exits): only the child's own listener counts.
fn came_up(mut child: Child, port: u16) -> Option<Child> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() && listens_on(child.id(), port) {
            return Some(child);
        }
        thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Runs `command` to completion and asserts it succeeded (its output in
/// the failure); `what` names it.
fn run_ok(command: &mut Command, what: &str) -> std::process::Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{sig} {pid} failed");
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A frozen server cannot die of SIGKILL until it is thawed? It can,
            // but make sure it is not left stopped if the kill fails.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .stderr(Stdio::null())
                .status();
        }
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `builder`, multiplexed over that many connections when the environment
/// variable `REDISSON_LOCK_TEST_MULTIPLEXED` is set (1 to 64): the support
/// clients of a test binary then run multiplexed (`scripts/torture.sh
/// --multiplexed N` and a rerun of any test binary use it).
pub fn connections(builder: redisson_lock::ClientBuilder) -> redisson_lock::ClientBuilder {
    match std::env::var("REDISSON_LOCK_TEST_MULTIPLEXED")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    {
        Some(n) => builder.multiplexed(n),
        None => builder,
    }
}

/// `Client::builder(url)` through [`connections`]: the builder the tests
/// that build their own clients start from.
pub fn builder(url: impl redis::IntoConnectionInfo) -> redisson_lock::ClientBuilder {
    connections(Client::builder(url))
}

/// A client of `url` (a server's, a proxy's) whose watchdog timeout is
/// `watchdog`.
pub fn watchdog_client(url: &str, watchdog: Duration) -> Client {
    connections(Client::builder(url))
        .watchdog_timeout(watchdog)
        .build()
        .expect("client")
}

/// A Lua script that keeps the server running it busy for `ARGV[1]` ms of
/// wall-clock time (it reads the clock with TIME, which advances inside a
/// script): `EVAL BUSY_SCRIPT 0 <ms>`.
pub const BUSY_SCRIPT: &str = "local t = redis.call('TIME') \
     local start = t[1] * 1000000 + t[2] \
     while true do \
       local now = redis.call('TIME') \
       if now[1] * 1000000 + now[2] - start >= tonumber(ARGV[1]) * 1000 then return 1 end \
     end";

/// Waits up to `within` until `client` has `count` threads waiting for a
/// lock (parked on its subscriber, or polling), and fails otherwise.
pub fn assert_waiting(client: &Client, count: usize, within: Duration) {
    assert!(
        eventually(within, || client.diagnostics().waiters == count),
        "expected {count} waiter(s): {:?}",
        client.diagnostics()
    );
}

/// Waits up to `within` until `client`'s diagnostics satisfy `expected`,
/// and fails with them otherwise.
pub fn assert_diagnostics(
    client: &Client,
    within: Duration,
    expected: impl Fn(&redisson_lock::Diagnostics) -> bool,
) {
    assert!(
        eventually(within, || expected(&client.diagnostics())),
        "{:?}",
        client.diagnostics()
    );
}

/// What `run` returned, and how long it took.
pub fn timed<T>(run: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = run();
    (value, started.elapsed())
}

/// The local clock in ms since the Unix epoch (what the crate and Redisson
/// write in permit and queue scores).
pub fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms")
}

/// `<scheme>://127.0.0.1:<port>/` of each of `ports`.
pub fn local_urls(scheme: &str, ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .map(|port| format!("{scheme}://127.0.0.1:{port}/"))
        .collect()
}

/// Polls `condition` every 5 ms until it holds or `within` passes; returns
/// whether it held. For functional bounds in tests, not for speed targets.
pub fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Captures log records so tests can assert on warnings (and on what is
/// never logged). Install once per test binary with [`logs::install`].
pub mod logs {
    use std::sync::{Mutex, OnceLock};

    static RECORDS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, record: &log::Record) {
            let line = format!("{} {}", record.level(), record.args());
            if let Some(records) = RECORDS.get() {
                records.lock().expect("log lock").push(line);
            }
        }
        fn flush(&self) {}
    }

    /// Installs the capturing logger (idempotent).
    pub fn install() {
        if RECORDS.set(Mutex::new(Vec::new())).is_ok() {
            let _ = log::set_boxed_logger(Box::new(Capture));
            log::set_max_level(log::LevelFilter::Trace);
        }
    }

    /// Every line logged so far in this test binary.
    pub fn lines() -> Vec<String> {
        RECORDS
            .get()
            .map(|records| records.lock().expect("log lock").clone())
            .unwrap_or_default()
    }
}

impl RedisServer {
    /// The `calls` counter of `INFO commandstats` for `command` (lowercase,
    /// e.g. `evalsha`); 0 when the command was never run.
    pub fn command_calls(&self, command: &str) -> u64 {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|rest| {
                rest.split(',')
                    .next()
                    .and_then(|calls| calls.trim().parse().ok())
                    .expect("a calls count")
            })
            .unwrap_or(0)
    }

    /// The scripts (`EVALSHA` and `EVAL`) the server ran so far, less
    /// those that failed (an `EVALSHA` of a script not loaded yet:
    /// `NOSCRIPT`).
    pub fn scripts_run(&self) -> u64 {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        let stat = |line: &str, name: &str| -> u64 {
            line.split([':', ','])
                .find_map(|field| field.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(0)
        };
        info.lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .map(|l| stat(l, "calls") - stat(l, "failed_calls"))
            .sum()
    }

    /// A plain connection subscribed to `channels` (confirmed by the server).
    pub fn subscriber(&self, channels: &[&str]) -> RawSubscriber {
        RawSubscriber::new(self.port, "SUBSCRIBE", channels)
    }

    /// A plain connection subscribed to the glob `patterns`.
    pub fn psubscriber(&self, patterns: &[&str]) -> RawSubscriber {
        RawSubscriber::new(self.port, "PSUBSCRIBE", patterns)
    }
}

/// One published message as a raw subscriber saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub channel: String,
    pub payload: String,
}

/// A plain TCP connection in subscriber mode, read with timeouts, for
/// watching exactly what is published (or what keyspace events happen).
pub struct RawSubscriber {
    stream: TcpStream,
    parser: redis::Parser,
}

impl RawSubscriber {
    /// A plain connection to `127.0.0.1:port` that sent `command` (e.g.
    /// `SUBSCRIBE`, `SSUBSCRIBE`) for `names`, each confirmed by the server:
    /// a cluster node's subscriber of one flavour.
    pub fn on_port(port: u16, command: &str, names: &[&str]) -> RawSubscriber {
        RawSubscriber::new(port, command, names)
    }

    fn new(port: u16, command: &str, names: &[&str]) -> RawSubscriber {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect a subscriber");
        let mut cmd = redis::cmd(command);
        cmd.arg(names);
        std::io::Write::write_all(&mut stream, &cmd.get_packed_command())
            .expect("send the subscription");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let mut subscriber = RawSubscriber {
            stream,
            parser: redis::Parser::new(),
        };
        for _ in names {
            let reply = subscriber.read().expect("subscription confirmed");
            assert_eq!(
                reply[0],
                command.to_lowercase(),
                "confirmation of {command}"
            );
        }
        subscriber
    }

    /// One reply as strings; `None` on a read timeout.
    fn read(&mut self) -> Option<Vec<String>> {
        match self.parser.parse_value(&mut self.stream) {
            Ok(value) => {
                let items: Vec<redis::Value> = redis::from_redis_value(value).expect("an array");
                Some(
                    items
                        .into_iter()
                        .map(|item| redis::from_redis_value(item).expect("a string"))
                        .collect(),
                )
            }
            Err(e) if e.is_timeout() => None,
            Err(e) => panic!("subscriber connection failed: {e}"),
        }
    }

    /// The next message, or `None` when none arrives `within`.
    pub fn next_message(&mut self, within: Duration) -> Option<Message> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream
                .set_read_timeout(Some(left))
                .expect("read timeout");
            let strings = self.read()?;
            match strings.first().map(String::as_str) {
                Some("message" | "smessage") => {
                    return Some(Message {
                        channel: strings[1].clone(),
                        payload: strings[2].clone(),
                    });
                }
                Some("pmessage") => {
                    return Some(Message {
                        channel: strings[2].clone(),
                        payload: strings[3].clone(),
                    });
                }
                _ => continue,
            }
        }
    }

    /// Every message that arrives within `window`.
    pub fn messages_within(&mut self, window: Duration) -> Vec<Message> {
        let deadline = Instant::now() + window;
        let mut messages = Vec::new();
        while let Some(message) =
            self.next_message(deadline.saturating_duration_since(Instant::now()))
        {
            messages.push(message);
        }
        messages
    }

    /// The payloads of [`RawSubscriber::messages_within`], in order.
    pub fn payloads_within(&mut self, window: Duration) -> Vec<String> {
        self.messages_within(window)
            .into_iter()
            .map(|m| m.payload)
            .collect()
    }
}

/// Number of threads of this process whose name (`/proc/self/task/*/comm`,
/// which Linux truncates to 15 bytes) is exactly `name`.
pub fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("list /proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// The example `name`, built for the running test's profile and target dir.
/// `cargo test` builds examples, but `cargo test --test X` does not, and a
/// stale binary would test old code: ask cargo (a no-op when up to date).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // <target>/<profile>/deps/<test>-<hash>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test executable in <target>/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if let Ok(cargo) = std::env::var("CARGO") {
        let target_dir = profile_dir.parent().expect("target dir");
        let mut build = Command::new(cargo);
        build
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--quiet", "--example", name, "--target-dir"])
            .arg(target_dir);
        match profile_dir.file_name().and_then(|profile| profile.to_str()) {
            Some("debug") | None => {}
            Some("release") => {
                build.arg("--release");
            }
            Some(profile) => {
                build.args(["--profile", profile]);
            }
        }
        let status = build.status().expect("run cargo build --example");
        assert!(status.success(), "cargo build --example {name} failed");
    }
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build --example {name}`",
        binary.display()
    );
    binary
}
