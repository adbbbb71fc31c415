//! Leader election on the fenced lock (issue 33, item 5): two Rust
//! candidate processes (`examples/leader.rs`) and a Java 4.7.0 service
//! campaigning with `lockAndGetToken`, leaders killed and resigning: one
//! leader at a time, terms strictly increasing, the fenced log written in
//! term order.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::java::{Redisson, start_with_watchdog};

const WATCHDOG: Duration = Duration::from_millis(900);

/// A candidate process; killed by pid when dropped.
struct Candidate {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Candidate {
    fn start(url: &str) -> Candidate {
        let mut child = Command::new(support::example_binary("leader"))
            .args([url, "elect", &WATCHDOG.as_millis().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("a candidate process");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Candidate {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// Its term, once it printed `LEADER`, waiting at most `within`.
    fn elected(&self, within: Duration) -> Option<u64> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(rest) = line.strip_prefix("LEADER ") {
                let term = rest.split(' ').next().expect("term");
                return Some(term.parse().expect("a term"));
            }
        }
    }

    fn resign(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "resign").expect("write");
        stdin.flush().expect("flush");
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if line == "RESIGNED" {
                return;
            }
        }
        panic!("the leader did not resign");
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn rust_processes_and_a_java_service_elect_one_leader_at_a_time_with_rising_terms() {
    let (server, java) = start_with_watchdog(Redisson::Newest, WATCHDOG);
    let observer = Client::open(server.url()).expect("observer");
    let election = observer.leader_election("elect");
    assert_eq!(election.leader().expect("leader"), None);

    let mut a = Candidate::start(&server.url());
    let term_a = a.elected(Duration::from_secs(20)).expect("A elected");
    let (field_a, seen) = election.leader().expect("leader").expect("A leads");
    assert_eq!(seen, term_a);
    let mut b = Candidate::start(&server.url());
    java.send("j", "lockToken fenced/elect");
    assert_eq!(b.elected(Duration::from_millis(500)), None, "two leaders");
    assert!(java.try_recv("j", Duration::ZERO).is_none(), "two leaders");

    // The leader dies: the seat is free within its lease, and exactly one
    // of the others takes it, with a higher term.
    a.kill();
    let killed = Instant::now();
    let (term_b, java_leads) = loop {
        if let Some(term) = b.elected(Duration::from_millis(20)) {
            break (term, false);
        }
        if let Some(reply) = java.try_recv("j", Duration::from_millis(20)) {
            break (reply.value::<u64>(0), true);
        }
        assert!(killed.elapsed() < WATCHDOG * 5, "nobody took over");
    };
    assert!(term_b > term_a, "term {term_b} after {term_a}");
    let (field_b, seen) = election.leader().expect("leader").expect("a leader");
    assert_ne!(field_b, field_a);
    assert_eq!(seen, term_b);
    // The other one still waits.
    if java_leads {
        assert_eq!(b.elected(Duration::from_millis(300)), None, "two leaders");
    } else {
        assert!(
            java.try_recv("j", Duration::from_millis(300)).is_none(),
            "two leaders"
        );
    }

    // The new leader resigns: the last candidate is woken at once.
    let resigned = Instant::now();
    let term_c = if java_leads {
        java.ok("j", "unlock fenced/elect");
        b.elected(Duration::from_secs(5)).expect("B elected")
    } else {
        b.resign();
        java.recv("j").value::<u64>(0)
    };
    assert!(
        resigned.elapsed() < Duration::from_secs(2),
        "woken {:?} after the resignation",
        resigned.elapsed()
    );
    assert!(term_c > term_b, "term {term_c} after {term_b}");
    assert_eq!(
        election.leader().expect("leader").map(|l| l.1),
        Some(term_c)
    );
    if java_leads {
        b.resign();
    } else {
        java.ok("j", "unlock fenced/elect");
    }
    assert_eq!(election.leader().expect("leader"), None);

    // The fenced log: written under the Rust leaders' terms, in order.
    let log: Vec<String> = server.cmd(&["LRANGE", "elect:log", "0", "-1"]);
    let terms: Vec<u64> = log
        .iter()
        .map(|entry| {
            entry
                .rsplit(' ')
                .next()
                .expect("term")
                .parse()
                .expect("term")
        })
        .collect();
    assert!(!terms.is_empty());
    assert!(terms.windows(2).all(|w| w[0] <= w[1]), "{terms:?}");
    assert!(terms.contains(&term_a));
}

#[test]
fn a_campaign_with_a_limit_gives_up_and_a_resignation_frees_the_seat() {
    let server = support::RedisServer::start();
    let client = server.watchdog_client(WATCHDOG);
    let election = client.leader_election("seat");
    let first = election.campaign().expect("elected");
    assert!(!first.is_lost());
    let rival = client.leader_election("seat");
    let started = Instant::now();
    assert!(
        rival
            .try_campaign_for(Duration::from_millis(300))
            .expect("campaign")
            .is_none()
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Held past its lease by the watchdog, on any thread.
    let first = thread::spawn(move || {
        thread::sleep(WATCHDOG * 2);
        first
    })
    .join()
    .expect("holder");
    assert!(first.ensure_held().is_ok());
    let term = first.term();
    let (field, seen) = election.leader().expect("leader").expect("a leader");
    assert_eq!((field.as_str(), seen), (first.owner_field(), term));
    let waiting = thread::spawn(move || rival.campaign());
    thread::sleep(Duration::from_millis(200));
    let resigned = Instant::now();
    first.resign().expect("resign");
    let second = waiting.join().expect("campaign").expect("elected");
    assert!(resigned.elapsed() < Duration::from_secs(2));
    assert!(second.term() > term);
}
