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
