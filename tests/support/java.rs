//! Real Redisson in the tests: builds the Java interop driver
//! (`interop/java/`, see its README.md) and talks to it.
//!
//! A [`JavaDriver`] is one JVM with one `RedissonClient`, connected to a test's
//! redis-server. It runs named *actors*, each a dedicated Java thread (Redisson
//! locks belong to Java threads), fed one command line at a time. Replies are
//! routed per actor by a reader thread, so a test can start `t1 lock x`, which
//! blocks in Java, and read its reply later while talking to `t2`.
//!
//! The driver jars are built once per test run (and cached across test
//! binaries and runs by `build.sh`). Without `java` or `mvn` the tests panic
//! with instructions; they never pass silently.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// The Redisson versions every interop scenario runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redisson {
    /// The interop pom's default `redisson.version`: the newest release.
    Newest,
    /// The oldest version the crate promises to interoperate with (the first
    /// with the unlock latch, PROTOCOL §11).
    V3_24_3,
    /// Any other release the driver builds against (3.12.4 and later; the
    /// version matrix of `tests/java_versions.rs`).
    Exact(&'static str),
}

impl Redisson {
    /// The Maven version string.
    pub fn version(self) -> String {
        match self {
            Redisson::Newest => pom_default_version(),
            Redisson::V3_24_3 => "3.24.3".to_owned(),
            Redisson::Exact(version) => version.to_owned(),
        }
    }
}

/// How long a reply may take before a test gives up on the driver. Functional
/// limit only (a JVM stuck or crashed), never a speed target.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// The repository's root: this crate's, or its parent's when the harness
/// is included by the `cli/` workspace member's tests.
fn repo_root() -> &'static Path {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    match dir.parent() {
        Some(parent) if !dir.join("interop").exists() => parent,
        _ => dir,
    }
}

fn interop_dir() -> PathBuf {
    repo_root().join("interop").join("java")
}

/// Where `build.sh` puts the jars (shared by all engineers' target dirs, so
/// the cache survives `CARGO_TARGET_DIR` changes).
fn jar_dir() -> PathBuf {
    repo_root().join("target").join("interop")
}

/// `<redisson.version>` from the interop pom: the "newest" of the matrix.
fn pom_default_version() -> String {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            let pom = interop_dir().join("pom.xml");
            let text = std::fs::read_to_string(&pom)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", pom.display()));
            let start = text
                .find("<redisson.version>")
                .unwrap_or_else(|| panic!("no <redisson.version> property in {}", pom.display()))
                + "<redisson.version>".len();
            let end = start
                + text[start..]
                    .find("</redisson.version>")
                    .expect("unterminated <redisson.version>");
            text[start..end].trim().to_owned()
        })
        .clone()
}

fn require_tool(tool: &str, version_flag: &str) {
    let found = Command::new(tool)
        .arg(version_flag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "the Java interop tests need `{tool}` on PATH (a JDK 17+ and Maven), and do not skip \
         without it: run scripts/test.sh as root (it installs them via ensure_java_maven), or \
         `apt-get install openjdk-17-jdk-headless maven`"
    );
}

/// The driver jar for `version`, built on first use in this process (and
/// reused from `target/interop` when `build.sh` finds it up to date).
pub fn driver_jar(version: &str) -> PathBuf {
    static JARS: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut jars = JARS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(jar) = jars.get(version) {
        return jar.clone();
    }
    require_tool("java", "-version");
    require_tool("mvn", "-v");
    let started = Instant::now();
    let output = Command::new("bash")
        .arg(interop_dir().join("build.sh"))
        .arg(version)
        .arg(jar_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run interop/java/build.sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "interop/java/build.sh {version} failed ({}):\n{stderr}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let jar = PathBuf::from(
        stdout
            .lines()
            .last()
            .unwrap_or_else(|| panic!("build.sh {version} printed no jar path; stderr:\n{stderr}"))
            .trim(),
    );
    assert!(
        jar.is_file(),
        "build.sh {version} printed {jar:?}, which is not a file"
    );
    eprintln!(
        "redisson driver {version}: {} ({:?})",
        jar.display(),
        started.elapsed()
    );
    jars.insert(version.to_owned(), jar.clone());
    jar
}

/// One reply line: `<actor> <op> OK <values...>`, `<actor> <op> ERR
/// <Exception> <message>`, or `<actor> <op> NA <why>` when the loaded
/// Redisson version lacks what the command needs (e.g. the fenced lock
/// before 3.19.0).
#[derive(Clone, Debug)]
pub struct Reply {
    /// When the reader thread received the line.
    pub at: Instant,
    pub actor: String,
    pub op: String,
    pub ok: bool,
    /// `NA`: not applicable to this Redisson version (then `ok` is false
    /// and the values are `NotApplicable` and the reason's words).
    pub na: bool,
    /// After `OK`: the values; after `ERR`: the exception name, then the message words.
    pub values: Vec<String>,
    pub line: String,
}

impl Reply {
    fn parse(line: &str, at: Instant) -> Option<Reply> {
        let mut words = line.split_whitespace();
        let actor = words.next()?.to_owned();
        let op = words.next()?.to_owned();
        let (ok, na) = match words.next()? {
            "OK" => (true, false),
            "ERR" => (false, false),
            "NA" => (false, true),
            _ => return None,
        };
        let mut values: Vec<String> = words.map(str::to_owned).collect();
        if na {
            values.insert(0, "NotApplicable".to_owned());
        }
        Some(Reply {
            at,
            actor,
            op,
            ok,
            na,
            values,
            line: line.to_owned(),
        })
    }

    /// The exception's simple class name of an `ERR` reply.
    pub fn exception(&self) -> Option<&str> {
        if self.ok {
            None
        } else {
            self.values.first().map(String::as_str)
        }
    }

    /// Value `i` of an `OK` reply, parsed.
    pub fn value<T: std::str::FromStr>(&self, i: usize) -> T
    where
        T::Err: std::fmt::Debug,
    {
        assert!(self.ok, "expected OK, got `{}`", self.line);
        let text = self
            .values
            .get(i)
            .unwrap_or_else(|| panic!("reply `{}` has no value {i}", self.line));
        text.parse()
            .unwrap_or_else(|e| panic!("value {i} of `{}`: {e:?}", self.line))
    }
}

/// What the reader threads share with the test.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    arrived: Condvar,
}

#[derive(Default)]
struct State {
    replies: HashMap<String, VecDeque<Reply>>,
    /// Lines that are not replies (or arrive after BYE): a protocol error.
    strays: Vec<String>,
    /// Driver's stdout closed (it quit or died).
    closed: bool,
    /// The driver's stderr, for failure messages.
    stderr: Vec<String>,
}

/// A running driver JVM (one `RedissonClient`), killed by pid when dropped.
pub struct JavaDriver {
    child: Child,
    stdin: Mutex<ChildStdin>,
    shared: Arc<Shared>,
    /// The Redisson version the JVM actually loaded (from `READY`).
    pub version: String,
    /// The `RedissonClient` id: the UUID in its lock fields.
    pub client_id: String,
}

impl JavaDriver {
    /// Starts a driver for `version` against `redis_url`, with Redisson's
    /// `lockWatchdogTimeout` set to `watchdog`, and waits for `READY`.
    pub fn start(version: Redisson, redis_url: &str, watchdog: Duration) -> JavaDriver {
        JavaDriver::start_with(version, redis_url, watchdog, &[])
    }

    /// [`JavaDriver::start`] over TLS: `redis_url` is a `rediss://` URL (or
    /// a topology of them) and the server's certificate is checked against
    /// the CA in `truststore` (PKCS12, opened with `password`; see
    /// `support::tls::Certs::java_truststore`).
    pub fn start_tls(
        version: Redisson,
        redis_url: &str,
        watchdog: Duration,
        truststore: &Path,
        password: &str,
    ) -> JavaDriver {
        JavaDriver::start_with(
            version,
            redis_url,
            watchdog,
            &[truststore.as_os_str(), std::ffi::OsStr::new(password)],
        )
    }

    /// The driver with `extra` arguments after the URL and watchdog timeout.
    fn start_with(
        version: Redisson,
        redis_url: &str,
        watchdog: Duration,
        extra: &[&std::ffi::OsStr],
    ) -> JavaDriver {
        let wanted = version.version();
        let jar = driver_jar(&wanted);
        let mut child = Command::new("java")
            // Small, quick-starting JVM: several run at once on a small machine.
            .args([
                "-Xss512k",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ])
            .arg("-jar")
            .arg(&jar)
            .arg(redis_url)
            .arg(watchdog.as_millis().to_string())
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `java -jar {}`: {e}", jar.display()));
        let shared = Arc::new(Shared::default());
        let stdin = child.stdin.take().expect("driver stdin");
        let stdout = child.stdout.take().expect("driver stdout");
        let stderr = child.stderr.take().expect("driver stderr");
        {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("java-driver-stderr".into())
                .spawn(move || {
                    for line in BufReader::new(stderr).lines() {
                        let Ok(line) = line else { break };
                        shared.state.lock().expect("driver state").stderr.push(line);
                    }
                })
                .expect("spawn stderr reader");
        }
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("java-driver-stdout".into())
                .spawn(move || read_replies(stdout, &shared, ready_tx))
                .expect("spawn stdout reader");
        }
        let mut driver = JavaDriver {
            child,
            stdin: Mutex::new(stdin),
            shared,
            version: String::new(),
            client_id: String::new(),
        };
        let ready = match ready_rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(line) => line,
            Err(_) => panic!(
                "the Redisson {wanted} driver did not print READY; stderr:\n{}",
                driver.stderr()
            ),
        };
        let words: Vec<&str> = ready.split_whitespace().collect();
        assert!(
            words.len() == 3 && words[0] == "READY",
            "expected `READY <version> <client id>`, got `{ready}`; stderr:\n{}",
            driver.stderr()
        );
        driver.version = words[1].to_owned();
        driver.client_id = words[2].to_owned();
        assert_eq!(
            driver.version, wanted,
            "the driver built for Redisson {wanted} loaded Redisson {}",
            driver.version
        );
        driver
    }

    /// Sends `<actor> <command>` without waiting for the reply.
    pub fn send(&self, actor: &str, command: &str) {
        assert!(
            !actor.contains(char::is_whitespace) && !actor.is_empty(),
            "bad actor name {actor:?}"
        );
        let mut stdin = self.stdin.lock().expect("driver stdin");
        writeln!(stdin, "{actor} {command}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("driver stdin closed ({e}); stderr:\n{}", self.stderr()));
    }

    /// The next reply of `actor`, waiting up to `within`; `None` if none came.
    pub fn try_recv(&self, actor: &str, within: Duration) -> Option<Reply> {
        let deadline = Instant::now() + within;
        let mut state = self.shared.state.lock().expect("driver state");
        loop {
            assert!(
                state.strays.is_empty(),
                "the driver printed lines that are not replies: {:?}",
                state.strays
            );
            if let Some(reply) = state.replies.get_mut(actor).and_then(VecDeque::pop_front) {
                return Some(reply);
            }
            let now = Instant::now();
            if state.closed || now >= deadline {
                return None;
            }
            state = self
                .shared
                .arrived
                .wait_timeout(state, deadline - now)
                .expect("driver state")
                .0;
        }
    }

    /// The next reply of `actor` (panics after [`REPLY_TIMEOUT`] or if the
    /// driver died).
    pub fn recv(&self, actor: &str) -> Reply {
        match self.try_recv(actor, REPLY_TIMEOUT) {
            Some(reply) => reply,
            None => panic!(
                "no reply for actor {actor} from Redisson {} (driver {}); stderr:\n{}",
                self.version,
                if self.shared.state.lock().expect("driver state").closed {
                    "exited"
                } else {
                    "silent"
                },
                self.stderr()
            ),
        }
    }

    /// Sends a command and waits for its reply.
    pub fn call(&self, actor: &str, command: &str) -> Reply {
        self.send(actor, command);
        let reply = self.recv(actor);
        let op = command.split_whitespace().next().unwrap_or_default();
        assert_eq!(
            reply.op, op,
            "reply `{}` to `{actor} {command}`",
            reply.line
        );
        reply
    }

    /// Sends a command, waits for its reply and asserts it is `OK`.
    pub fn ok(&self, actor: &str, command: &str) -> Reply {
        let reply = self.call(actor, command);
        assert!(
            reply.ok,
            "`{actor} {command}` on Redisson {} failed: `{}`",
            self.version, reply.line
        );
        reply
    }

    /// Sends a command whose reply is `OK true|false ...` and returns the flag.
    pub fn flag(&self, actor: &str, command: &str) -> bool {
        self.ok(actor, command).value(0)
    }

    /// The thread id an actor's locks carry: its hash field is
    /// `<client_id>:<thread id>`.
    pub fn owner_field(&self, actor: &str) -> String {
        let tid: u64 = self.ok(actor, "threadId").value(0);
        format!("{}:{tid}", self.client_id)
    }

    /// Runs one contended hand-off on a private lock so that the timed parts of
    /// a test do not pay for class loading and the first subscription.
    pub fn warm_up(&self) {
        let name = "interop-warm-up";
        self.ok("warm1", &format!("lock {name}"));
        self.send("warm2", &format!("lock {name}"));
        thread::sleep(Duration::from_millis(50));
        self.ok("warm1", &format!("unlock {name}"));
        let reply = self.recv("warm2");
        assert!(reply.ok, "warm-up hand-off failed: `{}`", reply.line);
        self.ok("warm2", &format!("unlock {name}"));
    }

    /// Waits for the Rust acquisition reported on `acquired` and asserts it
    /// came within `bound` of `since` (the Java release that should wake
    /// it); `what` names the hand-off in the log and in a failure.
    pub fn rust_woken(
        &self,
        acquired: &std::sync::mpsc::Receiver<Instant>,
        since: Instant,
        bound: Duration,
        what: &str,
    ) -> Duration {
        let handoff = super::sync::woken_within(acquired, since, bound, what);
        eprintln!("{}: {what} {handoff:?}", self.version);
        handoff
    }

    /// Waits for `actor`'s reply to the command it waits in (a lock, an
    /// acquire, an await), asserts it is `OK` and came within `bound` of
    /// `since` (the Rust release that should wake it); `what` names the
    /// hand-off in the log and in a failure. Returns the reply.
    pub fn java_woken(&self, actor: &str, since: Instant, bound: Duration, what: &str) -> Reply {
        let reply = self.recv(actor);
        assert!(reply.ok, "{what}: Java's {actor} failed: `{}`", reply.line);
        self.handoff(what, since, reply.at, bound);
        reply
    }

    /// `rust` starts `lock.lock()` while Java's `actor` holds the lock
    /// (`java_name` to the driver): the Rust thread is kept out for 300 ms,
    /// then Java's unlock wakes it within `bound`. It keeps the guard.
    pub fn unlock_wakes_rust<K: redisson_lock::Kind>(
        &self,
        (actor, java_name): (&str, &str),
        rust: &super::actor::RustThread,
        lock: &redisson_lock::Lock<K>,
        bound: Duration,
    ) -> Duration {
        let acquired = rust.start_lock(lock);
        super::actor::assert_kept_out(&acquired, Duration::from_millis(300));
        let sent = Instant::now();
        self.ok(actor, &format!("unlock {java_name}"));
        self.rust_woken(&acquired, sent, bound, "Java unlock -> Rust acquire")
    }

    /// Asserts that `actor` cannot take `java_name` now (`tryLockNow`): the
    /// Rust side holds it.
    pub fn assert_cannot_take(&self, actor: &str, java_name: &str) {
        assert!(
            !self.flag(actor, &format!("tryLockNow {java_name}")),
            "Java took {java_name} while the Rust side holds it"
        );
    }

    /// Waits `window` and asserts that `actor` has not answered: its lock
    /// command is kept waiting while the Rust side holds.
    pub fn assert_kept_out(&self, actor: &str, window: Duration) {
        thread::sleep(window);
        assert!(
            self.try_recv(actor, Duration::ZERO).is_none(),
            "Java actor {actor} acquired while the Rust side held the lock"
        );
    }

    fn handoff(&self, what: &str, since: Instant, at: Instant, bound: Duration) -> Duration {
        let handoff = at.saturating_duration_since(since);
        eprintln!("{}: {what} {handoff:?}", self.version);
        assert!(
            handoff < bound,
            "{what}: woken {handoff:?} after the release, not within {bound:?}"
        );
        handoff
    }

    /// The JVM's pid (to `kill -9` it: a Redisson client that dies holding
    /// its locks).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the driver wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.shared
            .state
            .lock()
            .map(|state| state.stderr.join("\n"))
            .unwrap_or_default()
    }
}

fn read_replies(
    stdout: std::process::ChildStdout,
    shared: &Shared,
    ready: std::sync::mpsc::Sender<String>,
) {
    let mut lines = BufReader::new(stdout).lines();
    if let Some(Ok(line)) = lines.next() {
        let _ = ready.send(line);
    }
    for line in lines {
        let Ok(line) = line else { break };
        let at = Instant::now();
        let mut state = shared.state.lock().expect("driver state");
        if line == "BYE" {
            break;
        }
        match Reply::parse(&line, at) {
            Some(reply) => state
                .replies
                .entry(reply.actor.clone())
                .or_default()
                .push_back(reply),
            None => state.strays.push(line),
        }
        drop(state);
        shared.arrived.notify_all();
    }
    shared.state.lock().expect("driver state").closed = true;
    shared.arrived.notify_all();
}

impl Drop for JavaDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh redis-server and a warmed-up Redisson driver on it (Java's
/// watchdog timeout: 30 s).
pub fn start(redisson: Redisson) -> (super::RedisServer, JavaDriver) {
    start_with_watchdog(redisson, Duration::from_secs(30))
}

/// [`start`], and a Rust client of the same server (default settings).
pub fn start_with_client(
    redisson: Redisson,
) -> (super::RedisServer, JavaDriver, redisson_lock::Client) {
    let (server, java) = start(redisson);
    let client = server.client();
    (server, java, client)
}

/// The binary's shared 3-master cluster, a warmed-up Redisson driver on it
/// (Java's watchdog timeout: 30 s) and a Rust cluster client of it.
pub fn start_cluster(
    redisson: Redisson,
) -> (
    &'static super::cluster::Cluster,
    JavaDriver,
    redisson_lock::Client,
) {
    let cluster = super::cluster::Cluster::shared();
    let seeds = format!("cluster:{}", cluster.urls().join(","));
    let java = JavaDriver::start(redisson, &seeds, Duration::from_secs(30));
    java.warm_up();
    (cluster, java, cluster.client())
}

/// [`start`] with Java's watchdog timeout set to `watchdog`.
pub fn start_with_watchdog(
    redisson: Redisson,
    watchdog: Duration,
) -> (super::RedisServer, JavaDriver) {
    let server = super::RedisServer::start();
    let java = JavaDriver::start(redisson, &server.url(), watchdog);
    java.warm_up();
    (server, java)
}

/// Stamps each scenario `fn(Redisson)` as one test per Redisson version:
/// `newest::<scenario>` and `redisson_3_24_3::<scenario>`.
#[allow(unused_macros)]
macro_rules! for_each_redisson_version {
    ($($scenario:ident),* $(,)?) => {
        mod newest {
            $(#[test] fn $scenario() { super::$scenario(super::Redisson::Newest) })*
        }
        mod redisson_3_24_3 {
            $(#[test] fn $scenario() { super::$scenario(super::Redisson::V3_24_3) })*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use for_each_redisson_version;
