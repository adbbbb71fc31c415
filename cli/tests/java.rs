//! The CLI beside real Redisson (the interop driver, interop/java, newest
//! version): a `run --hold-at-least` seen held by Java, a Java fair lock
//! inspected and force-unlocked, a Java holder killed with `kill -9` watched.

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Tmp, bin, wait_exit};
use support::java::{self, Redisson};

#[test]
fn hold_at_least_keeps_a_short_job_locked_for_java_and_for_a_late_run() {
    let (server, java) = java::start(Redisson::Newest);
    let tmp = Tmp::new("hold");
    let started = Instant::now();
    let first = bin(&server.url())
        .args([
            "run",
            "--hold-at-least",
            "5s",
            "nightly",
            "--",
            "sleep",
            "1",
        ])
        .status()
        .expect("run");
    assert_eq!(first.code(), Some(0), "the job's own status");
    let ended = started.elapsed();
    assert!(
        ended < Duration::from_secs(3),
        "the wrapper waited out the minimum ({ended:?})"
    );
    // The lease is the rest of the minimum, not the watchdog's 30 s.
    let pttl: i64 = server.cmd(&["PTTL", "nightly"]);
    assert!(
        pttl > 0 && pttl <= 5000 - 900,
        "PTTL {pttl} ms after a 1 s job under --hold-at-least 5s"
    );
    std::thread::sleep(Duration::from_secs(2).saturating_sub(started.elapsed() - ended));
    let late = bin(&server.url())
        .args(["run", "-n", "nightly", "--", "touch", &tmp.path("late-ran")])
        .status()
        .expect("late run");
    assert_eq!(late.code(), Some(75), "a run 2 s later is busy");
    assert!(!tmp.exists("late-ran"), "the late run ran the job");
    assert!(
        !java.flag("t1", "tryLockNow nightly"),
        "Java's tryLock() took it"
    );
    // Once the minimum is over, it is free.
    assert!(support::eventually(Duration::from_secs(5), || {
        server.cmd::<i64>(&["EXISTS", "nightly"]) == 0
    }));
    assert!(started.elapsed() >= Duration::from_millis(4900));
}

fn json(args: &[&str], url: &str) -> serde_json::Value {
    let out = bin(url).args(args).output().expect("redisson-lock");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn a_java_fair_lock_is_inspected_in_order_and_force_unlocked_waking_its_head() {
    let (server, java) = java::start(Redisson::Newest);
    let url = server.url();
    let holder = java.owner_field("h");
    let first = java.owner_field("w1");
    let second = java.owner_field("w2");
    java.ok("h", "lock fair/q");
    java.send("w1", "lock fair/q");
    assert!(support::eventually(Duration::from_secs(10), || {
        server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{q}"]) == 1
    }));
    java.send("w2", "lock fair/q");
    assert!(support::eventually(Duration::from_secs(10), || {
        server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{q}"]) == 2
    }));
    let info = json(&["--output", "json", "inspect", "q"], &url);
    assert_eq!(info["kind"], "fair");
    assert_eq!(info["holders"][0]["field"], holder.as_str());
    let queue: Vec<&str> = info["queue"]
        .as_array()
        .expect("queue")
        .iter()
        .map(|w| w["field"].as_str().expect("field"))
        .collect();
    assert_eq!(
        queue,
        [first.as_str(), second.as_str()],
        "the queue, head first"
    );
    let text = bin(&url).args(["inspect", "q"]).output().expect("inspect");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("1. {first}")) && text.contains(&format!("2. {second}")),
        "{text}"
    );

    // A stale owner (the head, who does not hold it) changes nothing.
    let stale = bin(&url)
        .args(["force-unlock", "q", "--if-owner", &first, "--yes"])
        .status()
        .expect("force-unlock --if-owner");
    assert_eq!(stale.code(), Some(1));
    assert_eq!(
        json(&["--output", "json", "inspect", "q"], &url)["holders"][0]["field"],
        holder.as_str()
    );
    assert!(java.try_recv("w1", Duration::from_millis(200)).is_none());

    // Without a terminal, confirmation needs --yes.
    let refused = bin(&url)
        .args(["force-unlock", "q"])
        .status()
        .expect("force-unlock");
    assert_eq!(refused.code(), Some(64));

    let freed_at = Instant::now();
    let freed = bin(&url)
        .args(["force-unlock", "q", "--if-owner", &holder, "--yes"])
        .status()
        .expect("force-unlock");
    assert_eq!(freed.code(), Some(0));
    let woken = java
        .try_recv("w1", Duration::from_secs(1))
        .expect("the Java head was not woken within a second");
    assert!(woken.ok, "{}", woken.line);
    eprintln!(
        "Java head woken {:?} after the force-unlock started",
        woken.at - freed_at
    );
    assert!(
        java.try_recv("w2", Duration::from_millis(100)).is_none(),
        "w2 jumped the queue"
    );
    java.ok("w1", "unlock fair/q");
    assert!(java.recv("w2").ok);
    java.ok("w2", "unlock fair/q");
}

#[test]
fn watch_reports_a_java_holder_killed_with_kill_9_as_expired() {
    let (server, java) = java::start_with_watchdog(Redisson::Newest, Duration::from_secs(2));
    let url = server.url();
    java.ok("t1", "lock w");
    let holder = java.owner_field("t1");
    let mut watch = bin(&url)
        .args([
            "--output",
            "json",
            "watch",
            "w",
            "--until",
            "free",
            "--timeout",
            "20s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(500));
    let pid = java.pid();
    // SAFETY: kill(2) on the JVM this test started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let stdout = watch.stdout.take().expect("stdout");
    let lines: Vec<serde_json::Value> = BufReader::new(stdout)
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("a JSON line"))
        .collect();
    assert_eq!(
        wait_exit(watch, Duration::from_secs(25)),
        Some(0),
        "--until free met"
    );
    let events: Vec<&str> = lines
        .iter()
        .map(|l| l["event"].as_str().expect("event"))
        .collect();
    assert_eq!(events, ["expired"], "{lines:?}");
    assert_eq!(lines[0]["holder"], holder.as_str());
    drop(java);

    // A release, by contrast, is `released` (the unlock message is seen),
    // and a take is `acquired`.
    let mut watch = bin(&url)
        .args(["--output", "json", "watch", "r", "--timeout", "20s"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(500));
    let run = bin(&url)
        .args(["run", "r", "--", "sleep", "0.5"])
        .status()
        .expect("run");
    assert_eq!(run.code(), Some(0));
    std::thread::sleep(Duration::from_millis(500));
    let _ = watch.kill();
    let stdout = watch.stdout.take().expect("stdout");
    let _ = watch.wait();
    let events: Vec<String> = BufReader::new(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.expect("line")).expect("JSON");
            v["event"].as_str().expect("event").to_owned()
        })
        .collect();
    assert_eq!(events, ["acquired", "released"]);
}
