//! Fault: the holder stalls past its lease (a GC pause, a frozen VM, SIGSTOP).
//!
//! The holder is a real child process (`tests/helpers/hold_lock.rs`, a test helper built as the `hold_lock` example target) frozen with
//! SIGSTOP while it holds a lock. Its lease runs out, another client takes the
//! lock; when the holder thaws, its guard must report the loss, its unlock must
//! fail, and neither its watchdog nor its unlock may touch the new holder's lock.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, channel};
use std::thread;
use std::time::{Duration, Instant};

use support::RedisServer;
use support::state::{exists, hgetall, pttl};

/// The `hold_lock` example, built for this test's profile and target dir
/// (once per binary).
fn hold_lock_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| support::example_binary("hold_lock"))
        .clone()
}

/// A `hold_lock` child process; killed (after a SIGCONT) when dropped.
struct Holder {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Holder {
    fn spawn(url: &str, name: &str, watchdog_ms: u64) -> Holder {
        let mut child = Command::new(hold_lock_binary())
            .args([url, name, &watchdog_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn hold_lock");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Holder {
            child,
            stdin,
            lines,
        }
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a line from hold_lock within 10 s")
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write to hold_lock");
        self.stdin.flush().expect("flush");
        self.line()
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} failed");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn holder_frozen_past_its_lease_loses_the_lock_and_leaves_the_new_holder_alone() {
    let server = RedisServer::start();
    let name = "stalled";
    let lease_ms = 600;
    let mut holder = Holder::spawn(&server.url(), name, lease_ms);
    let held = holder.line();
    let holder_field = held.strip_prefix("HELD ").expect("HELD <field>").to_owned();
    assert_eq!(
        hgetall(&server, name),
        HashMap::from([(holder_field.clone(), "1".to_owned())])
    );

    // Alive, its watchdog keeps the lock well past one lease.
    thread::sleep(Duration::from_millis(2 * lease_ms));
    assert_eq!(holder.ask("lost"), "LOST false");
    let ttl = pttl(&server, name);
    assert!(
        ttl > 0 && ttl <= 600,
        "renewed to the 600 ms lease, PTTL {ttl}"
    );

    // Freeze it: nothing renews, the lease runs out, another client gets in.
    holder.signal("STOP");
    let frozen = Instant::now();
    let client = server.client();
    let lock = client.lock(name);
    let guard = lock
        .try_lock_for(Duration::from_secs(5))
        .expect("try_lock_for")
        .expect("the lock is free once the frozen holder's lease ran out");
    let waited = frozen.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "took {waited:?} to acquire after a 600 ms lease"
    );
    let ours = HashMap::from([(client.owner_field(), "1".to_owned())]);
    assert_eq!(hgetall(&server, name), ours);

    // Thaw it well past its lease. Its guard knows at once, by its own clock.
    let stalled_for = Duration::from_millis(1500);
    thread::sleep(stalled_for.saturating_sub(frozen.elapsed()));
    holder.signal("CONT");
    assert_eq!(holder.ask("lost"), "LOST true");

    // Its watchdog runs a few periods (200 ms each) and must not renew our
    // key down to its 600 ms lease, nor touch the hash.
    thread::sleep(Duration::from_millis(3 * lease_ms / 3 + 200));
    assert_eq!(hgetall(&server, name), ours);
    let ttl = pttl(&server, name);
    assert!(ttl > 25_000, "our 30 s lease is untouched, PTTL {ttl}");

    // Its unlock fails as lost and does not touch our lock.
    let reply = holder.ask("unlock");
    assert!(
        reply.starts_with("UNLOCK lost=true err Lost"),
        "stalled holder's unlock: {reply}"
    );
    assert_eq!(hgetall(&server, name), ours);
    let ttl = pttl(&server, name);
    assert!(ttl > 25_000, "our 30 s lease is untouched, PTTL {ttl}");
    assert!(holder.child.wait().expect("hold_lock exits").success());

    guard.unlock().expect("the new holder unlocks normally");
    assert!(!exists(&server, name));
}

#[test]
fn holder_frozen_within_its_lease_keeps_the_lock() {
    // The control case: a stall shorter than the lease minus one renewal
    // period is survived, and the thawed holder still owns and unlocks it.
    let server = RedisServer::start();
    let name = "briefly-stalled";
    let mut holder = Holder::spawn(&server.url(), name, 3000);
    let held = holder.line();
    let holder_field = held.strip_prefix("HELD ").expect("HELD <field>").to_owned();

    holder.signal("STOP");
    let client = server.client();
    let lock = client.lock(name);
    assert!(
        lock.try_lock_for(Duration::from_millis(800))
            .expect("try_lock_for")
            .is_none(),
        "the lock is still within the frozen holder's lease"
    );
    holder.signal("CONT");

    thread::sleep(Duration::from_millis(1200));
    assert_eq!(holder.ask("lost"), "LOST false");
    assert_eq!(
        hgetall(&server, name),
        HashMap::from([(holder_field, "1".to_owned())])
    );
    assert_eq!(holder.ask("unlock"), "UNLOCK lost=false ok");
    assert!(!exists(&server, name));
}
