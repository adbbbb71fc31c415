//! `Client::doctor` (issue 34) on a real redis-server: each hazard planted
//! with raw commands (the Java-planted ones are in tests/java_versions.rs),
//! a healthy server of Rust locks of every kind reported clean, no write
//! seen by MONITOR during a run, the key budget, and a million-key scan
//! timed.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_lock::{DoctorReport, Severity};
use support::RedisServer;

fn kinds(report: &DoctorReport) -> Vec<(&'static str, Severity, Option<String>)> {
    report
        .findings
        .iter()
        .map(|f| (f.kind, f.severity, f.name.clone()))
        .collect()
}

fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    u64::try_from(since.as_millis()).expect("ms")
}

const READER: &str = "5f0d3c1e-2b7a-4e55-9a3c-0c1d2e3f4a5b:7";

#[test]
fn a_healthy_server_is_clean_and_each_planted_hazard_is_found() {
    let (server, client) = RedisServer::start_with_client();
    // Healthy locks of every kind, held.
    let _lock = client.lock("healthy").lock().expect("lock");
    let _fair = client.fair_lock("healthy-fair").lock().expect("fair");
    let _fenced = client.fenced_lock("healthy-fenced").lock().expect("fenced");
    let rw = client.read_write_lock("healthy-rw");
    let _read = rw.read_lock().lock().expect("read");
    let pes = client.permit_expirable_semaphore("healthy-pes");
    assert!(pes.try_set_permits(2).expect("set"));
    let _permit = pes.acquire(Some(Duration::from_secs(60))).expect("permit");
    let report = client.doctor().run().expect("doctor");
    assert!(report.complete);
    assert_eq!(report.masters, 1);
    assert!(report.keys_scanned >= 4);
    assert_eq!(report.worst(), None, "{:?}", report.findings);

    // A reader whose markers are gone (Redisson 3.44-3.52's renewal).
    server.cmd::<i64>(&["HSET", "rw-broken", "mode", "read", READER, "2"]);
    server.cmd::<i64>(&["PEXPIRE", "rw-broken", "30000"]);
    // Permit ids as hex text (Redisson up to 3.16.8), and in both encodings.
    let far = (now_ms() + 60_000).to_string();
    let hex = "0123456789abcdef0123456789abcdef";
    server.cmd::<i64>(&["ZADD", "{old-sem}:timeout", &far, hex]);
    server.cmd::<i64>(&["ZADD", "{mixed-sem}:timeout", &far, hex]);
    server.cmd::<i64>(&["ZADD", "{mixed-sem}:timeout", &far, "0123456789abcdef"]);
    // Fair waiters queued 5 s and 300 s apart, and one past its deadline.
    let at = |ms: u64| (now_ms() + ms).to_string();
    let queue = "redisson_lock_timeout:{split-fair}";
    for (ms, who) in [(10_000, "a:1"), (15_000, "b:1"), (315_000, "c:1")] {
        server.cmd::<i64>(&["ZADD", queue, &at(ms), who]);
    }
    let past = (now_ms() - 60_000).to_string();
    server.cmd::<i64>(&["ZADD", "redisson_lock_timeout:{stale-fair}", &past, "d:1"]);

    let report = client.doctor().run().expect("doctor");
    let found = kinds(&report);
    let has = |kind: &str, severity: Severity, name: &str| {
        found
            .iter()
            .any(|(k, s, n)| *k == kind && *s == severity && n.as_deref() == Some(name))
    };
    assert!(
        has("reader-without-marker", Severity::Error, "rw-broken"),
        "{found:?}"
    );
    assert!(
        has("hex-permit-ids", Severity::Warning, "old-sem"),
        "{found:?}"
    );
    assert!(
        has("hex-permit-ids", Severity::Error, "mixed-sem"),
        "{found:?}"
    );
    assert!(
        has(
            "fair-wait-timeout-mismatch",
            Severity::Warning,
            "split-fair"
        ),
        "{found:?}"
    );
    assert!(
        has("stale-fair-waiter", Severity::Warning, "stale-fair"),
        "{found:?}"
    );
    // Nothing about the healthy ones.
    assert!(
        found
            .iter()
            .all(|(_, _, n)| !n.as_deref().is_some_and(|n| n.starts_with("healthy"))),
        "{found:?}"
    );
    assert_eq!(report.worst(), Some(Severity::Error));
    assert_eq!(report.findings[0].severity, Severity::Error, "errors first");
}

/// Every command MONITOR shows while `during` runs.
fn monitored(server: &RedisServer, during: impl FnOnce()) -> Vec<String> {
    let mut monitor = TcpStream::connect(("127.0.0.1", server.port())).expect("monitor");
    monitor.write_all(b"MONITOR\r\n").expect("MONITOR");
    let mut reader = BufReader::new(monitor.try_clone().expect("clone"));
    let mut ok = String::new();
    reader.read_line(&mut ok).expect("+OK");
    assert_eq!(ok.trim(), "+OK");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let collector = {
        let seen = Arc::clone(&seen);
        thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                seen.lock().expect("seen").push(line);
            }
        })
    };
    during();
    // A marker after the run: everything before it was seen.
    server.cmd::<String>(&["ECHO", "doctor-done"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen
        .lock()
        .expect("seen")
        .iter()
        .any(|l| l.contains("doctor-done"))
    {
        assert!(Instant::now() < deadline, "MONITOR never saw the marker");
        thread::sleep(Duration::from_millis(10));
    }
    let _ = monitor.shutdown(std::net::Shutdown::Both);
    let _ = collector.join();
    seen.lock().expect("seen").clone()
}

#[test]
fn a_doctor_run_writes_nothing() {
    let (server, client) = RedisServer::start_with_client();
    let _held = client.lock("held").lock().expect("lock");
    server.cmd::<i64>(&["HSET", "rw-broken", "mode", "read", READER, "1"]);
    server.cmd::<i64>(&["ZADD", "redisson_lock_timeout:{q}", "1", "a:1"]);
    let doctor = client.doctor().page_size(2);
    let lines = monitored(&server, || {
        let report = doctor.run().expect("doctor");
        assert!(report.worst() >= Some(Severity::Warning));
    });
    let commands: Vec<String> = lines
        .iter()
        .filter_map(|line| line.split('"').nth(1).map(str::to_ascii_uppercase))
        .collect();
    assert!(commands.iter().any(|c| c == "SCAN"), "{commands:?}");
    let reads = [
        "SCAN", "HGETALL", "PTTL", "ZRANGE", "PUBSUB", "SCRIPT", "TIME", "ECHO", "PING", "HELLO",
        "CLIENT", "SELECT", "AUTH", "INFO",
    ];
    let writes: Vec<&String> = commands
        .iter()
        .filter(|c| !reads.contains(&c.as_str()))
        .collect();
    assert!(writes.is_empty(), "a doctor run sent {writes:?}");
    let loads: Vec<&String> = lines
        .iter()
        .filter(|l| l.to_ascii_uppercase().contains("\"LOAD\""))
        .collect();
    assert!(loads.is_empty(), "SCRIPT LOAD sent: {loads:?}");
    // The watchdog's renewals of `held` are the client's, not the doctor's:
    // they run on the watchdog's own connection, at a third of 30 s.
}

#[test]
fn the_key_budget_stops_the_scan_and_says_so() {
    let (server, client) = RedisServer::start_with_client();
    for i in 0..50 {
        server.cmd::<i64>(&["HSET", &format!("h{i}"), "f", "1"]);
    }
    let report = client
        .doctor()
        .max_keys(10)
        .page_size(5)
        .run()
        .expect("doctor");
    assert!(!report.complete);
    assert!(report.keys_scanned < 50);
    assert!(report.keys_examined >= 10);
    assert!(report.findings.iter().any(|f| f.kind == "scan-incomplete"));
    assert_eq!(report.worst(), Some(Severity::Info));
}

/// docs/operating.md quotes this measurement ("redisson-lock doctor").
#[test]
fn a_million_keys_are_scanned_in_seconds() {
    let (server, client) = RedisServer::start_with_client();
    // In batches, so that no one script blocks the server for long.
    for batch in 0..10 {
        let from = (batch * 100_000).to_string();
        server.cmd::<()>(&[
            "EVAL",
            "for i = 1, 100000 do redis.call('set', 'key:' .. (ARGV[1] + i), i) end",
            "0",
            &from,
        ]);
    }
    for i in 0..1000 {
        server.cmd::<i64>(&["HSET", &format!("lock{i}"), READER, "1"]);
    }
    let progress = Arc::new(Mutex::new(0u64));
    let seen = Arc::clone(&progress);
    let started = Instant::now();
    let report = client
        .doctor()
        .on_progress(move |keys| *seen.lock().expect("progress") = keys)
        .run()
        .expect("doctor");
    let took = started.elapsed();
    println!(
        "doctor: {} keys examined, {} of them hashes or sorted sets (1,001,000 keys on the server) in {took:?}",
        report.keys_examined, report.keys_scanned
    );
    assert!(report.complete);
    assert!(report.keys_scanned >= 1000, "the hashes");
    assert_eq!(*progress.lock().expect("progress"), report.keys_examined);
    assert!(
        report.keys_examined >= 2_000_000,
        "two passes over a million keys"
    );
    assert_eq!(report.worst(), None, "{:?}", report.findings);
    assert!(took < Duration::from_secs(120), "took {took:?}");
}
