//! One watchdog thread per client, however many locks it holds, renewing them
//! in one round trip per 100 locks per tick (PROTOCOL §10.2).
//!
//! This binary holds a single test on purpose: it counts the threads of the
//! whole process, which other tests' clients would add to.

mod support;

use std::thread;
use std::time::Duration;

use support::monitor::{Call, monitor_evalsha};
use support::state::pttl;
use support::{RedisServer, threads_named};

/// A run of calls with no gap longer than half the renewal period: one tick.
#[derive(Debug)]
struct Burst {
    calls: u32,
    first_us: u64,
    last_us: u64,
}

/// Groups calls into ticks.
fn bursts(calls: &[Call], period: Duration) -> Vec<Burst> {
    let mut bursts: Vec<Burst> = Vec::new();
    for call in calls {
        match bursts.last_mut() {
            Some(burst) if call.at_us - burst.last_us < period.as_micros() as u64 / 2 => {
                burst.calls += 1;
                burst.last_us = call.at_us;
            }
            _ => bursts.push(Burst {
                calls: 1,
                first_us: call.at_us,
                last_us: call.at_us,
            }),
        }
    }
    bursts
}

#[test]
fn three_hundred_locks_are_renewed_by_one_thread_in_three_round_trips_per_tick() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let period = watchdog / 3;
    let before_client = threads_named("rlock-watchdog");
    assert_eq!(before_client, 0, "no client in this process yet");
    let client = server.watchdog_client(watchdog);
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
    // then watch every EVALSHA the server runs, with its own timestamps.
    thread::sleep(period * 2);
    let calls_before = server.command_calls("evalsha");
    // Seven bursts: five complete ticks between the two cut by the edges.
    let seen = monitor_evalsha(&server, Duration::from_secs(10), |calls| {
        bursts(calls, period).len() >= 7
    });
    let calls_during = server.command_calls("evalsha") - calls_before;
    assert!(
        seen.iter().all(|call| call.keys == 100),
        "every renewal call carries 100 locks: {seen:?}"
    );
    assert!(
        calls_during >= seen.len() as u64,
        "INFO commandstats counted {calls_during} EVALSHA, MONITOR saw {}",
        seen.len()
    );
    let bursts = bursts(&seen, period);
    eprintln!("renewal bursts: {bursts:?}");
    assert!(bursts.len() >= 7, "a tick every {period:?}: {bursts:?}");
    // The first and last bursts may be cut by the window's edges.
    let complete = &bursts[1..bursts.len() - 1];
    for burst in complete {
        assert_eq!(
            burst.calls, 3,
            "one renewal round trip per 100 locks per tick: {bursts:?}"
        );
    }
    for pair in complete.windows(2) {
        let gap = Duration::from_micros(pair[1].first_us - pair[0].first_us);
        // A period from one run's start to the next's (the sends jitter
        // by a fraction of a millisecond around it).
        assert!(
            gap >= period * 9 / 10 && gap < period * 5,
            "ticks {gap:?} apart: {bursts:?}"
        );
    }

    // Every lock is alive and every hold is intact.
    for name in names.iter().step_by(37) {
        let ttl = pttl(&server, name);
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
