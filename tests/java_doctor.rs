//! `Client::doctor` next to real Redisson: the versions whose scripts the
//! server ran are named, a healthy mixed fleet (Java and Rust locks held,
//! renewed) is reported clean, and `identify_holders` names the Rust holder
//! and never a Java one.

mod support;

use std::thread;
use std::time::Duration;

use redisson_lock::Severity;
use support::java::{Redisson, for_each_redisson_version, start_with_watchdog};

for_each_redisson_version!(the_doctor_names_the_java_version_and_finds_a_healthy_fleet_clean,);

fn the_doctor_names_the_java_version_and_finds_a_healthy_fleet_clean(redisson: Redisson) {
    let (server, java) = start_with_watchdog(redisson, Duration::from_millis(1500));
    let client = server.client();
    for name in [
        "doc-lock",
        "fair/doc-fair",
        "read/doc-rw",
        "fenced/doc-fenced",
    ] {
        java.ok("j", &format!("lock {name}"));
    }
    let _rust = client.lock("doc-rust").lock().expect("lock");
    let _rust_read = client
        .read_write_lock("doc-rw")
        .read_lock()
        .lock()
        .expect("read");
    thread::sleep(Duration::from_millis(1000)); // Java renewed its locks
    let report = client.doctor().run().expect("doctor");
    assert_eq!(
        report.worst(),
        Some(Severity::Info),
        "{:?}",
        report.findings
    );
    let versions = report
        .findings
        .iter()
        .find(|f| f.kind == "redisson-versions")
        .expect("the versions seen");
    let release = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().expect("n")).collect() };
    let java_version = release(&java.version);
    assert!(
        versions
            .ranges
            .iter()
            .any(|r| release(&r.from) <= java_version && java_version <= release(&r.to)),
        "{} not in {:?}",
        java.version,
        versions.ranges
    );
    // Who holds: the Rust reader is named, the Java holder never guessed.
    let info = client.inspect("doc-rw").expect("inspect");
    assert_eq!(info.holders.len(), 2);
    let who = client.identify_holders(&info).expect("identify");
    assert_eq!(who.keys().collect::<Vec<_>>(), vec![client.id()]);
    assert!(!who.contains_key(&java.client_id));
    for name in [
        "doc-lock",
        "fair/doc-fair",
        "read/doc-rw",
        "fenced/doc-fenced",
    ] {
        java.ok("j", &format!("unlock {name}"));
    }
}

fn finding<'a>(
    report: &'a redisson_lock::DoctorReport,
    kind: &str,
    name: Option<&str>,
) -> &'a redisson_lock::Finding {
    report
        .findings
        .iter()
        .find(|f| f.kind == kind && f.name.as_deref() == name)
        .unwrap_or_else(|| panic!("no {kind} for {name:?}: {:?}", report.findings))
}

fn has_version(report: &redisson_lock::DoctorReport, version: &str) -> bool {
    let release = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().expect("n")).collect() };
    let wanted = release(version);
    report
        .findings
        .iter()
        .filter(|f| f.kind == "redisson-versions")
        .flat_map(|f| &f.ranges)
        .any(|r| release(&r.from) <= wanted && wanted <= release(&r.to))
}

/// Issue 34: each hazard planted by the real Redisson that plants it.
#[test]
fn the_doctor_finds_what_old_redisson_releases_leave_behind() {
    let server = support::RedisServer::start();
    let client = server.client();

    // Redisson 3.16.8 writes permit ids as hex text.
    let old = support::java::JavaDriver::start(
        Redisson::Exact("3.16.8"),
        &server.url(),
        Duration::from_secs(30),
    );
    old.ok("p", "pes.trySetPermits doc-sem 2");
    old.ok("p", "pes.acquire doc-sem 60000");
    let report = client.doctor().run().expect("doctor");
    assert_eq!(
        finding(&report, "hex-permit-ids", Some("doc-sem")).severity,
        Severity::Warning
    );
    assert!(has_version(&report, "3.16.8"), "{:?}", report.findings);
    drop(old);

    // Redisson 3.52.0's renewal loses a twice-holding reader's markers.
    let defect = support::java::JavaDriver::start(
        Redisson::Exact("3.52.0"),
        &server.url(),
        Duration::from_secs(3),
    );
    defect.ok("r1", "lock read/doc-rw");
    defect.ok("r1", "lock read/doc-rw");
    let field = defect.owner_field("r1");
    let marker_gone = || {
        let ttl: i64 = server.cmd(&["PTTL", &format!("{{doc-rw}}:{field}:rwlock_timeout:1")]);
        let held: i64 = server.cmd(&["EXISTS", "doc-rw"]);
        ttl == -2 && held == 1
    };
    assert!(
        support::eventually(Duration::from_secs(10), marker_gone),
        "Redisson 3.52.0 kept the markers"
    );
    let report = client.doctor().run().expect("doctor");
    let broken = finding(&report, "reader-without-marker", Some("doc-rw"));
    assert_eq!(broken.severity, Severity::Error);
    assert!(broken.detail.contains(&field), "{}", broken.detail);
    assert!(has_version(&report, "3.52.0"), "{:?}", report.findings);
    defect.ok("r1", "forceUnlock read/doc-rw");
    drop(defect);

    // Fair waiters of Redisson 3.12.4 (5 s) and 4.7.0 (300 s) in one queue.
    let oldest = support::java::JavaDriver::start(
        Redisson::Exact("3.12.4"),
        &server.url(),
        Duration::from_secs(30),
    );
    let newest =
        support::java::JavaDriver::start(Redisson::Newest, &server.url(), Duration::from_secs(30));
    oldest.ok("h", "lock fair/doc-fair");
    oldest.send("w1", "lock fair/doc-fair");
    oldest.send("w2", "lock fair/doc-fair");
    thread::sleep(Duration::from_millis(500));
    newest.send("w3", "lock fair/doc-fair");
    thread::sleep(Duration::from_millis(500));
    let queued: i64 = server.cmd(&["LLEN", "redisson_lock_queue:{doc-fair}"]);
    assert_eq!(queued, 3);
    let report = client.doctor().run().expect("doctor");
    assert_eq!(
        finding(&report, "fair-wait-timeout-mismatch", Some("doc-fair")).severity,
        Severity::Warning
    );
    assert!(has_version(&report, "3.12.4") && has_version(&report, "4.7.0"));
    // A healthy queue of one version is not reported: free it.
    oldest.ok("h", "forceUnlock fair/doc-fair");
}

/// Issue 34: Redisson 3.21.3 (classic pub/sub) and 4.7.0 (sharded) waiting
/// in one cluster: the split is an error, and both versions are named.
#[test]
fn the_doctor_finds_classic_and_sharded_redisson_waiters_in_one_cluster() {
    let cluster = support::cluster::Cluster::shared();
    let seeds = format!("cluster:{}", cluster.urls().join(","));
    let classic = support::java::JavaDriver::start(
        Redisson::Exact("3.21.3"),
        &seeds,
        Duration::from_secs(30),
    );
    let sharded =
        support::java::JavaDriver::start(Redisson::Newest, &seeds, Duration::from_secs(30));
    let client = cluster.client();
    let _held = client.lock("doc-split").lock().expect("lock");
    classic.send("w1", "lock doc-split");
    sharded.send("w2", "lock doc-split");
    thread::sleep(Duration::from_millis(1500)); // both subscribed
    let report = client.doctor().run().expect("doctor");
    assert_eq!(
        finding(&report, "pubsub-flavour-split", None).severity,
        Severity::Error
    );
    assert!(has_version(&report, "3.21.3"), "{:?}", report.findings);
    assert!(has_version(&report, "4.7.0"), "{:?}", report.findings);
    // The waiters' JVMs end with the test; the lock goes with the client.
    drop((classic, sharded));
    drop(_held);
}
