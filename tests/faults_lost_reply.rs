//! Fault: a command's reply (or the command itself) is lost with its
//! connection, or arrives after the response timeout.
//!
//! The client talks to Redis through a test proxy (`support::proxy`) that can
//! lose the reply to, or the request of, one chosen command. An unlock whose
//! reply is lost is sent again: it sets the count the thread keeps (or finds
//! the field its first attempt removed), so the lock is released exactly
//! once, waiters are told exactly once, and the caller sees success. An acquire
//! whose reply is lost is not counted twice.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::Client;
use support::RedisServer;
use support::proxy::{Fault, Proxy};
use support::state::{channel, exists, lock_twice, pttl};

/// A fresh server, a proxy in front of it and a [`proxied_client`] of it.
fn proxied() -> (RedisServer, Proxy, Client) {
    let (server, proxy) = Proxy::with_server();
    let client = proxied_client(&proxy);
    (server, proxy, client)
}

/// What identifies a guard's release on the wire: its script's SHA1.
fn release() -> String {
    redis::Script::new(include_str!("../lua/rlock_release.lua"))
        .get_hash()
        .to_owned()
}

const FAULTS: [Fault; 3] = [
    Fault::DropReplyAndClose,
    Fault::DelayReply(Duration::from_millis(600)),
    Fault::DropRequestAndClose,
];

fn proxied_client(proxy: &Proxy) -> Client {
    let client = support::builder(proxy.url())
        .response_timeout(Duration::from_millis(300))
        .unlock_retries(3, Duration::from_millis(50))
        .build()
        .expect("client through the proxy");
    // Load the scripts (a first EVALSHA meets NOSCRIPT), so that the armed
    // command below is the one that runs.
    let warm_up = client.lock("warm-up").lock().expect("warm-up lock");
    warm_up.unlock().expect("warm-up unlock");
    client
}

fn latch_keys(server: &RedisServer) -> Vec<String> {
    server.cmd(&["KEYS", "redisson_unlock_latch:*"])
}

#[test]
fn unlock_with_a_lost_reply_releases_exactly_once_and_succeeds() {
    let (server, proxy, client) = proxied();
    for (round, fault) in FAULTS.into_iter().enumerate() {
        let name = format!("lost-reply-{round}");
        let mut watcher = server.subscriber(&[&channel(&name)]);
        let guard = client.lock(name.as_str()).lock().expect("lock");
        let unlocks_before = proxy.requests_containing(&release());
        let injected_before = proxy.injected();

        proxy.arm(&release(), fault);
        let unlocked = guard.unlock();
        assert!(
            unlocked.is_ok(),
            "{fault:?}: the unlock returned {unlocked:?}"
        );
        assert!(!proxy.armed(), "{fault:?}: the unlock never went out");
        assert_eq!(proxy.injected() - injected_before, 1, "{fault:?}");
        let sent = proxy.requests_containing(&release()) - unlocks_before;
        assert!(
            sent >= 2,
            "{fault:?}: the unlock was not retried ({sent} sent)"
        );

        assert!(
            !exists(&server, &name),
            "{fault:?}: the lock is still there"
        );
        let messages = watcher.messages_within(Duration::from_millis(800));
        assert_eq!(
            messages.len(),
            1,
            "{fault:?}: waiters must be told exactly once, got {messages:?}"
        );
        assert_eq!(messages[0].payload, "0");
        assert_eq!(client.diagnostics().registered_holds, 0);
    }
    // A guard's release needs no unlock latch: none is written.
    assert!(latch_keys(&server).is_empty(), "{:?}", latch_keys(&server));
}

#[test]
fn reentrant_unlock_with_a_lost_reply_releases_exactly_one_hold() {
    let (server, proxy, client) = proxied();
    for (round, fault) in FAULTS.into_iter().enumerate() {
        let name = format!("lost-reentrant-{round}");
        let lock = client.lock(name.as_str());
        let mut watcher = server.subscriber(&[&channel(&name)]);
        let (outer, inner) = lock_twice(&lock);
        let field = client.owner_field();
        assert_eq!(
            server.cmd::<HashMap<String, String>>(&["HGETALL", &name]),
            HashMap::from([(field.clone(), "2".to_owned())])
        );

        proxy.arm(&release(), fault);
        let unlocked = inner.unlock();
        assert!(
            unlocked.is_ok(),
            "{fault:?}: the unlock returned {unlocked:?}"
        );
        assert_eq!(proxy.injected(), round + 1, "{fault:?}");
        assert_eq!(
            server.cmd::<HashMap<String, String>>(&["HGETALL", &name]),
            HashMap::from([(field.clone(), "1".to_owned())]),
            "{fault:?}: one lost-reply unlock must release exactly one hold"
        );
        assert_eq!(lock.hold_count().expect("hold_count"), 1);
        let ttl = pttl(&server, &name);
        assert!(
            ttl > 25_000,
            "{fault:?}: lease reset on the partial release, PTTL {ttl}"
        );
        let messages = watcher.messages_within(Duration::from_millis(300));
        assert!(
            messages.is_empty(),
            "{fault:?}: a partial release published {messages:?}"
        );
        assert!(!outer.is_lost());

        outer.unlock().expect("the last hold unlocks");
        assert!(!exists(&server, &name));
        let messages = watcher.messages_within(Duration::from_millis(500));
        assert_eq!(messages.len(), 1, "{fault:?}: {messages:?}");
    }
}

#[test]
fn acquire_with_a_lost_reply_is_not_counted_twice() {
    let (server, proxy, client) = proxied();
    for (round, fault) in [Fault::DropReplyAndClose, Fault::DropRequestAndClose]
        .into_iter()
        .enumerate()
    {
        let name = format!("lost-acquire-{round}");
        let lock = client.lock(name.as_str());
        let field = client.owner_field();
        // The acquire is the first command that names the lock.
        proxy.arm(&name, fault);
        let acquired = lock.lock();
        assert!(!proxy.armed(), "{fault:?}: the acquire never went out");
        let guard = match acquired {
            Ok(guard) => guard,
            Err(e) => panic!("{fault:?}: lock() failed: {e}"),
        };
        assert_eq!(
            server.cmd::<HashMap<String, String>>(&["HGETALL", &name]),
            HashMap::from([(field.clone(), "1".to_owned())]),
            "{fault:?}: one lock() must be one hold"
        );
        guard.unlock().expect("unlock");
        assert!(
            !exists(&server, &name),
            "{fault:?}: the lock outlived its only guard"
        );
        assert_eq!(client.diagnostics().registered_holds, 0);
    }
}
