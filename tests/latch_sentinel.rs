//! `CountDownLatch` across a Redis Sentinel failover (a master, two
//! replicas, three sentinels, started once for this binary): a Rust
//! `wait()` that began on the old master is woken, through a subscription
//! moved to the new master, by a count-down to 0 made there after the
//! switch.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::sentinel::{MASTER_NAME, SentinelSetup, con};

fn client(setup: &SentinelSetup) -> Client {
    Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls())
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a Sentinel client")
}

fn subscribers(port: u16, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(&mut con(port))
        .expect("PUBSUB NUMSUB");
    reply.1
}

#[test]
fn a_waiter_from_before_a_failover_is_woken_by_a_count_down_on_the_new_master() {
    let (setup, _serial) = SentinelSetup::shared();
    setup.flush();
    let (waiting, counting) = (client(setup), client(setup));
    let name = "s-latch";
    let channel = "redisson_countdownlatch__channel__{s-latch}";
    let latch = waiting.count_down_latch(name);
    assert!(latch.try_set_count(1).expect("set"));
    let old = setup.master_port();
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(5000)
        .query(&mut con(old))
        .expect("WAIT");
    assert_eq!(acked, 2, "the count is on both replicas");

    let (tx, rx) = mpsc::channel();
    {
        let latch = latch.clone();
        thread::spawn(move || {
            latch.wait().expect("wait across the failover");
            let _ = tx.send(Instant::now());
        });
    }
    assert!(
        support::eventually(Duration::from_secs(5), || subscribers(old, channel) == 1),
        "the waiter subscribed on the master"
    );

    let (old, new) = setup.failover();
    eprintln!("failover {old} -> {new}");
    assert!(
        support::eventually(Duration::from_secs(10), || subscribers(new, channel) == 1),
        "the waiter's subscription moved to the new master"
    );
    assert!(
        rx.try_recv().is_err(),
        "the waiter left with the count at 1"
    );
    // The clients look the master up every second.
    thread::sleep(Duration::from_millis(1500));

    let sent = Instant::now();
    counting
        .count_down_latch(name)
        .count_down()
        .expect("count down on the new master");
    let at = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiter was never woken");
    let took = at.saturating_duration_since(sent);
    eprintln!("count-down on the new master -> waiter {took:?}");
    assert!(
        took < Duration::from_millis(500),
        "woken by the message on the new master, not the 3 s re-poll: {took:?}"
    );
    let exists: bool = redis::cmd("EXISTS")
        .arg(name)
        .query(&mut con(new))
        .expect("EXISTS");
    assert!(!exists, "counted down to 0 on the new master");
}
