//! `redisson-lock watch` through the library's own subscriber (issue 33,
//! item 6) under Sentinel, in a Redis 7 cluster with sharded pub/sub and
//! over TLS (a TLS-only server, with the CLI's default feature
//! `tls-rustls`), with a Java 4.7.0 holder: an unlock 400 ms before the
//! lease's end is `released` (its unlock message is heard), a lease that
//! runs out is `expired`. Before, `watch` opened a connection of its own to
//! the first URL: a sentinel, or a node without the slot's sharded channel.

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::thread;
use std::time::Duration;

use common::{bin, wait_exit};
use support::java::{JavaDriver, Redisson};

/// The events `watch NAME` printed while Java took NAME for 1500 ms and
/// released it 400 ms before the end, then took it for 1000 ms and let the
/// lease run out.
fn watched(conn: &[String], java: &JavaDriver, name: &str) -> Vec<String> {
    let mut args: Vec<String> = conn.to_vec();
    args.extend(["--output", "json", "watch", name, "--timeout", "8s"].map(String::from));
    let mut watch = bin("redis://127.0.0.1:1/")
        .args(&args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch");
    thread::sleep(Duration::from_millis(1500)); // connected and subscribed
    java.ok("t1", &format!("lockLease {name} 1500"));
    thread::sleep(Duration::from_millis(1100));
    java.ok("t1", &format!("unlock {name}"));
    thread::sleep(Duration::from_millis(800));
    java.ok("t1", &format!("lockLease {name} 1000"));
    let stdout = watch.stdout.take().expect("stdout");
    assert_eq!(
        wait_exit(watch, Duration::from_secs(20)),
        Some(1),
        "--timeout"
    );
    BufReader::new(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.expect("line")).expect("JSON");
            v["event"].as_str().expect("event").to_owned()
        })
        .collect()
}

#[test]
fn watch_tells_a_java_release_from_an_expiry_under_sentinel() {
    let (setup, _serial) = support::sentinel::SentinelSetup::shared();
    let sentinels = setup.sentinel_urls();
    let target = format!(
        "sentinel:{}:{}",
        support::sentinel::MASTER_NAME,
        sentinels.join(",")
    );
    let java = JavaDriver::start(Redisson::Newest, &target, Duration::from_secs(30));
    java.warm_up();
    let conn = vec![
        "--sentinel".to_owned(),
        support::sentinel::MASTER_NAME.to_owned(),
        "--url".to_owned(),
        sentinels.join(","),
    ];
    let events = watched(&conn, &java, "watched-sentinel");
    assert_eq!(events, ["acquired", "released", "acquired", "expired"]);
}

#[test]
fn watch_tells_a_java_release_from_an_expiry_in_a_sharded_cluster() {
    let cluster = support::cluster::Cluster::shared();
    let seeds = cluster.urls();
    let java = JavaDriver::start(
        Redisson::Newest,
        &format!("cluster:{}", seeds.join(",")),
        Duration::from_secs(30),
    );
    java.warm_up();
    let conn = vec!["--cluster".to_owned(), "--url".to_owned(), seeds.join(",")];
    let events = watched(&conn, &java, "watched-cluster");
    assert_eq!(events, ["acquired", "released", "acquired", "expired"]);
}

/// The server has no plain port (`--port 0`): the CLI's connections, its
/// subscriber's included, and Java's (Redisson with a truststore of the
/// test's CA) all go through TLS. Only with the TLS feature, which the CLI
/// has by default: without it `--tls-ca` is refused, and the test is not
/// compiled.
#[cfg(feature = "tls-rustls")]
#[test]
fn watch_tells_a_java_release_from_an_expiry_over_tls() {
    let certs = support::tls::Certs::make();
    let server = support::tls::TlsServer::start(&certs, false);
    let java = JavaDriver::start_tls(
        Redisson::Newest,
        &server.url(),
        Duration::from_secs(30),
        &certs.java_truststore(),
        support::tls::TRUSTSTORE_PASSWORD,
    );
    java.warm_up();
    let conn = vec![
        "--url".to_owned(),
        server.url(),
        "--tls-ca".to_owned(),
        certs.path("ca.crt").to_string_lossy().into_owned(),
    ];
    let events = watched(&conn, &java, "watched-tls");
    assert_eq!(events, ["acquired", "released", "acquired", "expired"]);
}
