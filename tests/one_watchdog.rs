//! One watchdog thread per client, however many locks it holds, renewing them
//! in one round trip per 100 locks per tick (PROTOCOL §10.2).
//!
//! This binary holds a single test on purpose: it counts the threads of the
//! whole process, which other tests' clients would add to.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::{RedisServer, threads_named};

/// A run of renewal calls: consecutive `evalsha` count increases with no gap
/// longer than a third of the renewal period between them.
#[derive(Debug)]
struct Burst {
    calls: u64,
    started: Instant,
}

#[test]
fn three_hundred_locks_are_renewed_by_one_thread_in_three_round_trips_per_tick() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let period = watchdog / 3;
    let before_client = threads_named("rlock-watchdog");
    assert_eq!(before_client, 0, "no client in this process yet");
    let client = Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .build()
        .expect("client");
    // A new thread names itself as it starts: give it a moment.
    assert!(
        support::eventually(Duration::from_secs(2), || threads_named("rlock-watchdog")
            == before_client + 1),
        "building a client starts one watchdog thread"
    );

    let names: Vec<String> = (0..300).map(|i| format!("bulk-{i:03}")).collect();
    let guards: Vec<_> = names
        .iter()
        .map(|name| client.lock(name.as_str()).lock().expect("lock"))
        .collect();
    assert_eq!(client.diagnostics().registered_holds, 300);
    assert_eq!(
        threads_named("rlock-watchdog") - before_client,
        1,
        "300 held locks, still one watchdog thread"
    );
    assert_eq!(
        threads_named("rlock-pubsub"),
        0,
        "no subscriber until a thread waits"
    );

    // Let a couple of ticks pass (the first may load the renewal script),
    // then watch the renewal round trips tick by tick.
    thread::sleep(period * 2);
    let mut bursts: Vec<Burst> = Vec::new();
    let mut last_calls = server.command_calls("evalsha");
    let mut last_change: Option<Instant> = None;
    let watch_until = Instant::now() + period * 8;
    while Instant::now() < watch_until {
        let calls = server.command_calls("evalsha");
        if calls > last_calls {
            let now = Instant::now();
            let continues = last_change.is_some_and(|at| now.duration_since(at) < period / 3);
            match bursts.last_mut() {
                Some(burst) if continues => burst.calls += calls - last_calls,
                _ => bursts.push(Burst {
                    calls: calls - last_calls,
                    started: now,
                }),
            }
            last_calls = calls;
            last_change = Some(now);
        }
        thread::sleep(Duration::from_millis(3));
    }
    eprintln!("renewal bursts: {bursts:?}");
    assert!(bursts.len() >= 6, "a tick every {period:?}: {bursts:?}");
    // The first and last bursts may be cut by the window's edges.
    let complete = &bursts[1..bursts.len() - 1];
    for burst in complete {
        assert_eq!(
            burst.calls, 3,
            "one renewal round trip per 100 locks per tick: {bursts:?}"
        );
    }
    for pair in complete.windows(2) {
        let gap = pair[1].started.duration_since(pair[0].started);
        assert!(
            gap >= period / 2 && gap < period * 3,
            "ticks {gap:?} apart: {bursts:?}"
        );
    }

    // Every lock is alive and every hold is intact.
    for name in names.iter().step_by(37) {
        let ttl: i64 = server.cmd(&["PTTL", name]);
        assert!(ttl > 0 && ttl <= 600, "{name}: PTTL {ttl}");
    }
    assert!(guards.iter().all(|guard| !guard.is_lost()));

    drop(guards);
    assert_eq!(client.diagnostics().registered_holds, 0);
    let after = server.command_calls("evalsha");
    thread::sleep(period * 3);
    assert_eq!(
        server.command_calls("evalsha"),
        after,
        "nothing left to renew, no renewal calls"
    );
    let size: i64 = server.cmd(&["DBSIZE"]);
    assert_eq!(size, 0, "no lock (nor latch) left");

    drop(client);
    assert!(
        support::eventually(Duration::from_secs(2), || threads_named("rlock-watchdog")
            == before_client),
        "the watchdog thread ends with its client"
    );
}
