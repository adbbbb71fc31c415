//! `CountDownLatch`, Redisson's `RCountDownLatch` (SYNCHRONIZERS §5), on a
//! real redis-server: the count's semantics, exactly what is published and
//! when, Rust waiters woken by the count-down to 0 and by a delete, a
//! count-down whose reply is lost (never resent: `OutcomeUnknown`), bad
//! input and keys of the wrong type, and the same wake-up in a 3-master
//! Redis 7 cluster (`SPUBLISH`; the cluster is started once for this
//! binary, on first use).

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error};
use support::RedisServer;
use support::cluster::{Cluster, calls};
use support::proxy::{Fault, Proxy};
use support::sync::{assert_took_ms, latch_waiter as waiter, woken_within};

/// A message-driven wake-up must beat the waiters' 3 s safety re-poll by
/// far: a functional bound, not a speed target.
const PROMPT: Duration = Duration::from_secs(1);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// Blocks until `client` has a subscription (the waiters are parked).
fn await_subscribed(client: &Client) {
    assert!(
        support::eventually(Duration::from_secs(5), || client
            .diagnostics()
            .subscribed_channels
            > 0),
        "the waiters never subscribed"
    );
    thread::sleep(Duration::from_millis(100));
}

/// Waits until `client` dropped its subscriptions with its last waiter.
fn unsubscribed(client: &Client) {
    support::assert_diagnostics(client, Duration::from_secs(5), |d| {
        d.subscribed_channels == 0
    });
}

#[test]
fn set_count_down_and_read_the_count_as_redisson_does() {
    let (server, client) = RedisServer::start_with_client();
    let latch = client.count_down_latch("l-basic");
    assert_eq!(latch.name(), "l-basic");
    assert_eq!(latch.count().expect("count"), 0, "missing key reads 0");
    assert!(latch.wait_for(Duration::ZERO).expect("open latch"));
    latch.wait().expect("an open latch returns at once");

    let mut watch = server.subscriber(&[&channel("l-basic")]);
    assert!(latch.try_set_count(3).expect("set"));
    assert!(!latch.try_set_count(5).expect("set again"), "already set");
    assert_eq!(latch.count().expect("count"), 3);
    let stored: String = server.cmd(&["GET", "l-basic"]);
    assert_eq!(stored, "3", "a plain decimal string, as Java's");
    let ttl: i64 = server.cmd(&["PTTL", "l-basic"]);
    assert_eq!(ttl, -1, "no TTL");
    assert_eq!(
        watch.payloads_within(Duration::from_millis(300)),
        ["1"],
        "NEW_COUNT_MESSAGE"
    );

    assert!(!latch.wait_for(Duration::from_millis(200)).expect("closed"));
    latch.count_down().expect("3 -> 2");
    latch.count_down().expect("2 -> 1");
    assert_eq!(latch.count().expect("count"), 1);
    assert!(
        watch.messages_within(Duration::from_millis(300)).is_empty(),
        "only the count-down to 0 publishes"
    );
    latch.count_down().expect("1 -> 0");
    assert_eq!(
        watch.payloads_within(Duration::from_millis(300)),
        ["0"],
        "ZERO_COUNT_MESSAGE"
    );
    let exists: bool = server.cmd(&["EXISTS", "l-basic"]);
    assert!(!exists, "the count-down to 0 deletes the key");
    assert_eq!(latch.count().expect("count"), 0);

    // Counting down an open latch: a no-op, no key, no message.
    latch.count_down().expect("count down an open latch");
    let exists: bool = server.cmd(&["EXISTS", "l-basic"]);
    assert!(!exists);
    assert!(watch.messages_within(Duration::from_millis(300)).is_empty());

    // Delete publishes "1" only when there was a key.
    assert!(!latch.delete().expect("delete nothing"));
    assert!(latch.try_set_count(2).expect("set"));
    let _ = watch.messages_within(Duration::from_millis(200));
    assert!(latch.delete().expect("delete"));
    assert_eq!(watch.payloads_within(Duration::from_millis(300)), ["1"]);
    assert_eq!(latch.count().expect("count"), 0);
    // Latch operations are plain writes: no WAIT (Redisson's evalWrite).
    assert_eq!(server.command_calls("wait"), 0);
}

#[test]
fn count_down_to_zero_wakes_every_rust_waiter_promptly() {
    let (server, client) = RedisServer::start_with_client();
    let other = server.client();
    let latch = client.count_down_latch("l-wake");
    assert!(latch.try_set_count(2).expect("set"));
    let waiters: Vec<_> = (0..3).map(|_| waiter(&latch)).collect();
    await_subscribed(&client);
    let timed = {
        let latch = latch.clone();
        thread::spawn(move || latch.wait_for(Duration::from_secs(30)).expect("wait_for"))
    };

    let remote = other.count_down_latch("l-wake");
    remote.count_down().expect("2 -> 1");
    thread::sleep(Duration::from_millis(300));
    for rx in &waiters {
        assert!(rx.try_recv().is_err(), "a waiter left at count 1");
    }
    let sent = Instant::now();
    remote.count_down().expect("1 -> 0");
    for rx in &waiters {
        woken_within(rx, sent, PROMPT, "the count-down to 0");
    }
    assert!(timed.join().expect("timed waiter"), "wait_for saw 0");
    unsubscribed(&client);
}

#[test]
fn delete_wakes_rust_waiters_which_recheck_the_count() {
    let (server, client) = RedisServer::start_with_client();
    let latch = client.count_down_latch("l-del");
    assert!(latch.try_set_count(5).expect("set"));
    let rx = waiter(&latch);
    await_subscribed(&client);
    let sent = Instant::now();
    assert!(
        server
            .client()
            .count_down_latch("l-del")
            .delete()
            .expect("delete")
    );
    woken_within(&rx, sent, PROMPT, "the delete's '1' message");
}

#[test]
fn wait_for_times_out_on_a_closed_latch() {
    let (_server, client) = RedisServer::start_with_client();
    let latch = client.count_down_latch("l-timeout");
    assert!(latch.try_set_count(1).expect("set"));
    let start = Instant::now();
    assert!(
        !latch
            .wait_for(Duration::from_millis(400))
            .expect("wait_for")
    );
    assert_took_ms(start, 400..3000);
    assert!(!latch.wait_for(Duration::ZERO).expect("one read"));
    assert_eq!(latch.count().expect("count"), 1, "waiting changes nothing");
}

#[test]
fn a_count_down_whose_reply_is_lost_is_never_resent() {
    let (server, proxy) = Proxy::with_server();
    let client = proxy.client_with_response_timeout(Duration::from_millis(300));
    // Load the script, so that the armed command is the one that runs.
    client
        .count_down_latch("warm-up")
        .count_down()
        .expect("warm-up");
    let faults = [
        (Fault::DropReplyAndClose, true),
        (Fault::DropRequestAndClose, false),
        (Fault::DelayReply(Duration::from_millis(800)), true),
    ];
    for (round, (fault, runs)) in faults.into_iter().enumerate() {
        let name = format!("l-lost-{round}");
        let latch = client.count_down_latch(name.as_str());
        assert!(latch.try_set_count(3).expect("set"));
        // 900 ms: time for a delayed reply to land.
        let settle = Duration::from_millis(900);
        let e = proxy.outcome_unknown((&name, fault), "count_down", settle, || latch.count_down());
        assert!(
            matches!(&e, Error::OutcomeUnknown { name: n, .. } if *n == name),
            "{e:?}"
        );
        let count: String = server.cmd(&["GET", &name]);
        let expected = if runs { "2" } else { "3" };
        assert_eq!(count, expected, "{fault:?}: decremented exactly once");
        // The client is usable afterwards.
        latch.count_down().expect("count down again");
        assert_eq!(
            latch.count().expect("count"),
            if runs { 1 } else { 2 },
            "{fault:?}"
        );
    }
}

#[test]
fn bad_input_and_edge_counts() {
    let (server, client) = RedisServer::start_with_client();
    let empty = client.count_down_latch("");
    assert!(matches!(empty.count(), Err(Error::InvalidArgument(_))));
    assert!(matches!(empty.count_down(), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        empty.try_set_count(1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(empty.delete(), Err(Error::InvalidArgument(_))));
    assert!(matches!(empty.wait(), Err(Error::InvalidArgument(_))));

    let latch = client.count_down_latch("l-edge");
    assert!(matches!(
        latch.try_set_count(u64::MAX),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        latch.try_set_count(i64::MAX as u64 + 1),
        Err(Error::InvalidArgument(_))
    ));
    let exists: bool = server.cmd(&["EXISTS", "l-edge"]);
    assert!(!exists, "nothing was sent");
    assert!(latch.try_set_count(i64::MAX as u64).expect("i64::MAX"));
    assert_eq!(latch.count().expect("count"), i64::MAX as u64);
    assert!(latch.delete().expect("delete"));

    // Java's trySetCount(0): a key holding 0, open, but it blocks a new set.
    assert!(latch.try_set_count(0).expect("zero"));
    let stored: String = server.cmd(&["GET", "l-edge"]);
    assert_eq!(stored, "0");
    assert_eq!(latch.count().expect("count"), 0);
    assert!(latch.wait_for(Duration::ZERO).expect("open"));
    assert!(!latch.try_set_count(2).expect("blocked by the 0 key"));
    assert!(latch.delete().expect("delete the 0 key"));
    assert!(latch.try_set_count(2).expect("set after delete"));

    // A negative count (Java's trySetCount(-5)) reads as 0 and is open.
    let _: () = server.cmd(&["SET", "l-neg", "-5"]);
    let negative = client.count_down_latch("l-neg");
    assert_eq!(negative.count().expect("count"), 0);
    negative.wait().expect("open");
    negative.count_down().expect("count down below 0 deletes");
    let exists: bool = server.cmd(&["EXISTS", "l-neg"]);
    assert!(!exists);
}

#[test]
fn keys_of_the_wrong_type_are_errors() {
    let (server, client) = RedisServer::start_with_client();
    let _: () = server.cmd(&["HSET", "l-hash", "f", "1"]);
    let latch = client.count_down_latch("l-hash");
    let is_wrongtype = |e: &Error| matches!(e, Error::Redis(r) if r.code() == Some("WRONGTYPE"));
    let e = latch.count().expect_err("count of a hash");
    assert!(is_wrongtype(&e), "{e:?}");
    let e = latch.count_down().expect_err("count down a hash");
    assert!(is_wrongtype(&e), "{e:?}");
    let e = latch
        .wait_for(Duration::from_millis(100))
        .expect_err("wait");
    assert!(is_wrongtype(&e), "{e:?}");
    // As Redisson's script: the key exists, so no count is set.
    assert!(!latch.try_set_count(1).expect("exists"));
    let kind: String = server.cmd(&["TYPE", "l-hash"]);
    assert_eq!(kind, "hash");

    let _: () = server.cmd(&["SET", "l-text", "abc"]);
    let text = client.count_down_latch("l-text");
    let e = text.count().expect_err("count of text");
    assert!(matches!(e, Error::UnexpectedReply(_)), "{e:?}");
    let e = text.count_down().expect_err("DECR of text");
    assert!(matches!(e, Error::Redis(_)), "{e:?}");
    let stored: String = server.cmd(&["GET", "l-text"]);
    assert_eq!(stored, "abc");
    // Delete removes whatever the key is (Redisson's script does too).
    assert!(latch.delete().expect("delete a hash"));
}

#[test]
fn cluster_count_down_to_zero_wakes_waiters_through_spublish() {
    let cluster = Cluster::shared();
    let client = cluster.client();
    let names = cluster.names_on_different_masters("l-cluster-", 3);
    for name in &names {
        let latch = client.count_down_latch(name.as_str());
        assert!(latch.try_set_count(1).expect("set"));
        let owner = cluster.owner(name);
        let rx = waiter(&latch);
        await_subscribed(&client);
        let (spublish, publish) = (calls(owner, "spublish"), calls(owner, "publish"));
        let sent = Instant::now();
        cluster
            .client()
            .count_down_latch(name.as_str())
            .count_down()
            .expect("count down");
        woken_within(&rx, sent, PROMPT, name);
        assert_eq!(calls(owner, "spublish"), spublish + 1, "{name}");
        assert_eq!(calls(owner, "publish"), publish, "{name}");
        unsubscribed(&client);
    }
}

#[test]
fn cluster_refuses_names_whose_channel_is_in_another_slot() {
    let cluster = Cluster::shared();
    let client = cluster.client();
    // SYNCHRONIZERS §2.1: key slot 2906, channel slot 5936.
    let name = "{job}:latch";
    assert_ne!(
        redisson_lock::key_slot(name.as_bytes()),
        redisson_lock::key_slot(channel(name).as_bytes())
    );
    let latch = client.count_down_latch(name);
    for (op, result) in [
        ("try_set_count", latch.try_set_count(1).map(|_| ())),
        ("count_down", latch.count_down()),
        ("delete", latch.delete().map(|_| ())),
    ] {
        match result {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("CROSSSLOT"), "{op}: {message}")
            }
            other => panic!("{op}: expected InvalidArgument, got {other:?}"),
        }
    }
    // Redis itself says CROSSSLOT to the same keys (Redisson's fate).
    let owner = cluster.owner(name);
    let refused = owner.try_cmd::<i64>(&[
        "EVAL",
        "return redis.call('exists', KEYS[1])",
        "2",
        name,
        &channel(name),
    ]);
    let e = refused.expect_err("CROSSSLOT");
    assert_eq!(e.code(), Some("CROSSSLOT"), "{e:?}");
    // Reading needs only the key.
    assert_eq!(latch.count().expect("count"), 0);
    // A name with braces whose slots agree works (`{job}` has no `}` after
    // the tag's close... use a name without `}`).
    let fine = client.count_down_latch("job{x");
    assert!(fine.try_set_count(1).expect("set"));
    fine.count_down().expect("count down");
}
