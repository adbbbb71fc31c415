//! Excluding and waiting: a holder written with plain Redis commands, as a
//! Java Redisson client leaves it, keeps the Rust lock out, and its release
//! (`DEL` + `PUBLISH <channel> 0`) wakes a Rust waiter at once rather than at
//! the end of its TTL.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::state::{numsub, pttl};
use support::waiter::Waiter;
use support::{RedisServer, eventually};

/// A Java client's owner field: its own UUID and thread id.
const JAVA_FIELD: &str = "0f6e2d4c-8a1b-4c3d-9e5f-a1b2c3d4e5f6:1";

/// Takes `name` the way Redisson's acquire script leaves it.
fn java_style_hold(server: &RedisServer, name: &str) {
    let _: () = server.cmd(&["HSET", name, JAVA_FIELD, "1"]);
    let _: () = server.cmd(&["PEXPIRE", name, "30000"]);
}

/// Releases `name` the way Redisson's unlock script does.
fn java_style_release(server: &RedisServer, name: &str, channel: &str) {
    let mut con = server.con();
    let (deleted, receivers): (i64, i64) = redis::pipe()
        .cmd("DEL")
        .arg(name)
        .cmd("PUBLISH")
        .arg(channel)
        .arg("0")
        .query(&mut con)
        .expect("release");
    assert_eq!(deleted, 1);
    assert_eq!(receivers, 1, "exactly one subscriber: the client's");
}

#[test]
fn java_style_holder_makes_try_lock_return_none() {
    let server = RedisServer::start();
    java_style_hold(&server, "shared");
    let client = server.client();
    let lock = client.lock("shared");
    assert!(lock.try_lock().expect("try_lock").is_none());
    assert!(lock.is_locked().expect("is_locked"));
    assert!(!lock.is_held_by_current_thread().expect("held"));
    assert_eq!(lock.hold_count().expect("count"), 0);
    let state: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", "shared"]);
    assert_eq!(state.len(), 1, "the holder's hash is untouched: {state:?}");
    assert_eq!(state[JAVA_FIELD], "1");
}

#[test]
fn try_lock_for_gives_up_after_its_wait_while_a_java_style_holder_keeps_the_lock() {
    let server = RedisServer::start();
    java_style_hold(&server, "busy");
    let client = server.client();
    let start = Instant::now();
    let got = client
        .lock("busy")
        .try_lock_for(Duration::from_millis(300))
        .expect("try_lock_for");
    let waited = start.elapsed();
    assert!(got.is_none());
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(1_300),
        "waited {waited:?}"
    );
    let ttl = pttl(&server, "busy");
    assert!(ttl > 28_000, "the holder's TTL is untouched: {ttl}");
}

#[test]
fn try_lock_for_gives_up_after_its_wait_while_another_client_holds_the_lock() {
    let server = RedisServer::start();
    let holder = Client::open(server.url()).expect("holder");
    let waiter = Client::open(server.url()).expect("waiter");
    let _held = holder.lock("contended").lock().expect("lock");
    for wait_ms in [50, 500] {
        let wait = Duration::from_millis(wait_ms);
        let start = Instant::now();
        let got = waiter
            .lock("contended")
            .try_lock_for(wait)
            .expect("try_lock_for");
        let waited = start.elapsed();
        assert!(got.is_none(), "wait {wait:?}");
        assert!(
            waited >= wait && waited < wait + Duration::from_secs(1),
            "wait {wait:?}, waited {waited:?}"
        );
    }
    assert_eq!(waiter.diagnostics().waiters, 0, "a timed-out waiter leaves");
    assert!(eventually(Duration::from_secs(2), || waiter
        .diagnostics()
        .subscribed_channels
        == 0));
}

#[test]
fn waiter_wakes_on_java_style_del_and_publish_long_before_the_ttl() {
    let server = RedisServer::start();
    java_style_hold(&server, "handoff");
    let channel = "redisson_lock__channel:{handoff}";
    let client = server.client();
    let (acquired_tx, acquired_rx) = mpsc::channel();
    let waiter = {
        let lock = client.lock("handoff");
        thread::spawn(move || {
            let guard = lock.lock().expect("lock");
            acquired_tx.send(Instant::now()).expect("report");
            let name = redisson_lock::LockGuard::lock_of(&guard).name().to_string();
            guard.unlock().expect("unlock");
            name
        })
    };
    assert!(
        eventually(Duration::from_secs(5), || numsub(&server, channel) == 1
            && client.diagnostics().waiters == 1),
        "the waiter subscribes to {channel}"
    );
    let ttl = pttl(&server, "handoff");
    assert!(ttl > 25_000, "the holder's lease is still long: {ttl}");

    java_style_release(&server, "handoff", channel);
    let published = Instant::now();
    let acquired = acquired_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiter acquires");
    let delay = acquired.saturating_duration_since(published);
    assert!(
        delay < Duration::from_millis(200),
        "woken {delay:?} after the publish, with {ttl} ms of TTL left"
    );
    assert_eq!(waiter.join().expect("waiter"), "handoff");
    assert!(eventually(Duration::from_secs(2), || client
        .diagnostics()
        .subscribed_channels
        == 0));
}

#[test]
fn a_name_with_a_brace_waits_on_the_verbatim_channel() {
    let server = RedisServer::start();
    let name = "{tenant-7}:invoices";
    let channel = "redisson_lock__channel:{tenant-7}:invoices";
    java_style_hold(&server, name);
    let client = server.client();
    let waiter = Waiter::lock(client.lock(name));
    assert!(
        eventually(Duration::from_secs(5), || numsub(&server, channel) == 1),
        "the waiter subscribes to {channel}"
    );
    let channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS"]);
    assert_eq!(channels, vec![channel.to_string()]);

    java_style_release(&server, name, channel);
    let published = Instant::now();
    waiter.woken_within(
        published,
        Duration::from_millis(200),
        Duration::from_secs(10),
    );
}

#[test]
fn waiter_in_the_same_client_wakes_on_release() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("w");
    let guard = lock.lock().expect("lock");
    let waiter = Waiter::try_lock_for(lock.clone(), Duration::from_secs(20));
    assert!(eventually(Duration::from_secs(5), || {
        client.diagnostics().waiters == 1 && numsub(&server, "redisson_lock__channel:{w}") == 1
    }));
    drop(guard);
    let released = Instant::now();
    waiter.woken_within(
        released,
        Duration::from_millis(500),
        Duration::from_secs(10),
    );
    assert!(eventually(Duration::from_secs(2), || client
        .diagnostics()
        .subscribed_channels
        == 0));
    assert!(!lock.is_locked().expect("locked"));
}

#[test]
fn holder_without_ttl_is_waited_for_by_message() {
    // PTTL -1: a key with no expiry. The waiter must not spin; it waits for
    // the unlock message (with a slow poll as a fallback).
    let server = RedisServer::start();
    let _: () = server.cmd(&["HSET", "forever", JAVA_FIELD, "1"]);
    let client = server.client();
    let waiter = Waiter::lock(client.lock("forever"));
    let channel = "redisson_lock__channel:{forever}";
    assert!(eventually(Duration::from_secs(5), || numsub(
        &server, channel
    ) == 1));
    let before = server.command_calls("evalsha");
    thread::sleep(Duration::from_millis(500));
    let attempts = server.command_calls("evalsha") - before;
    assert!(attempts <= 2, "{attempts} acquire attempts in 500 ms");
    java_style_release(&server, "forever", channel);
    let published = Instant::now();
    waiter.woken_within(
        published,
        Duration::from_millis(200),
        Duration::from_secs(10),
    );
}
