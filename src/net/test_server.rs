//! A real `redis-server` for the library's own unit tests (the integration
//! tests have `tests/support`): started on a free 127.0.0.1 port, killed by
//! its pid when dropped, whatever the test did.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static SERVERS: AtomicUsize = AtomicUsize::new(0);

/// One server process.
pub(crate) struct TestServer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

/// A port nothing listens on now (never 6379).
pub(crate) fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("local addr").port();
        if port != 6379 {
            return port;
        }
    }
}

impl TestServer {
    /// A server on a free port.
    pub fn start() -> TestServer {
        for _ in 0..5 {
            if let Some(server) = TestServer::start_on(free_port()) {
                return server;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// A server on `port`; `None` if it did not come up (the port taken).
    pub fn start_on(port: u16) -> Option<TestServer> {
        // `scripts/test.sh`'s trap reaps the servers whose directory names
        // its run (tests/support's `test_dir`).
        let run: String = std::env::var("REDISSON_LOCK_TEST_RUN")
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let run = if run.is_empty() { "adhoc".into() } else { run };
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "redisson-lock-test-{run}-{}-unit{n}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("the server's directory");
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `{binary}`: {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(TestServer { child, port, dir });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        None
    }

    /// A plain redis-rs connection to look at the server with.
    pub fn con(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("url")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test server")
    }

    /// `args` run on a fresh connection.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.con()).expect("command")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
