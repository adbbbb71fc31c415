//! The fair lock's own behaviour (PROTOCOL §3): arrival order across
//! clients, the queue and deadline zset exactly as Redisson keeps them, the
//! give-up on a timed-out wait, try-once never queueing, only the head woken
//! on its own channel, stale heads purged, and lost acquire replies.

mod support;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_lock::{Client, Error, LostReason, RequestId, UnlockOutcome};
use support::RedisServer;
use support::eventually;
use support::proxy::{Fault, Proxy};
use support::state::{assert_free, assert_no_phantom_hold, pttl, queue};
use support::waiter::{fair_waiter, served_within};

fn client(server: &RedisServer) -> Client {
    server.client()
}

fn zset_len(server: &RedisServer, name: &str) -> i64 {
    server.cmd(&["ZCARD", &format!("redisson_lock_timeout:{{{name}}}")])
}

fn score(server: &RedisServer, name: &str, field: &str) -> Option<f64> {
    server.cmd(&[
        "ZSCORE",
        &format!("redisson_lock_timeout:{{{name}}}"),
        field,
    ])
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as f64
}

/// Waits until the queue of `name` is `expected`.
fn queued(server: &RedisServer, name: &str, expected: &[String]) {
    support::state::queued(server, name, expected, Duration::from_secs(5));
}

#[test]
fn waiters_of_two_clients_are_served_in_arrival_order() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let holder = clients[0].fair_lock("order").lock().expect("lock");
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut fields = Vec::new();
    let mut done = Vec::new();
    for i in 0..6 {
        let served = Arc::clone(&served);
        let (field, got) = fair_waiter(&clients[i % 2], "order", None, Duration::from_millis(20));
        fields.push(field.clone());
        queued(&server, "order", &fields);
        done.push(thread::spawn(move || {
            got.recv_timeout(Duration::from_secs(30)).expect("served");
            served.lock().expect("served").push(field);
        }));
    }
    holder.unlock().expect("unlock");
    for d in done {
        d.join().expect("waiter");
    }
    assert_eq!(*served.lock().expect("served"), fields);
    assert!(eventually(Duration::from_secs(5), || {
        !clients[0]
            .fair_lock("order")
            .is_locked()
            .expect("is_locked")
    }));
    assert!(queue(&server, "order").is_empty());
    assert_eq!(zset_len(&server, "order"), 0);
}

#[test]
fn a_timed_out_waiter_leaves_the_queue_and_moves_those_behind_it_up() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    let holder = a.fair_lock("give-up").lock().expect("lock");
    let (quitter, quitter_got) = fair_waiter(
        &b,
        "give-up",
        Some(Duration::from_millis(700)),
        Duration::ZERO,
    );
    queued(&server, "give-up", std::slice::from_ref(&quitter));
    let (patient, _patient_got) = fair_waiter(&a, "give-up", None, Duration::ZERO);
    queued(&server, "give-up", &[quitter.clone(), patient.clone()]);
    let before = score(&server, "give-up", &patient).expect("patient's deadline");
    assert_eq!(
        quitter_got
            .recv_timeout(Duration::from_secs(5))
            .expect("gave up"),
        None
    );
    queued(&server, "give-up", std::slice::from_ref(&patient));
    assert_eq!(score(&server, "give-up", &quitter), None);
    let after = score(&server, "give-up", &patient).expect("patient's deadline");
    // Lowered by the quitter's waitMs: its budget, measured when it started.
    let lowered = before - after;
    assert!((650.0..=700.0).contains(&lowered), "lowered by {lowered}");
    holder.unlock().expect("unlock");
    assert!(eventually(Duration::from_secs(5), || queue(
        &server, "give-up"
    )
    .is_empty()));
    assert_eq!(zset_len(&server, "give-up"), 0);
}

#[test]
fn try_lock_never_queues() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    let holder = a.fair_lock("once").lock().expect("lock");
    assert!(b.fair_lock("once").try_lock().expect("try_lock").is_none());
    assert!(queue(&server, "once").is_empty());
    assert_eq!(zset_len(&server, "once"), 0);
    let exists: i64 = server.cmd(&[
        "EXISTS",
        "redisson_lock_queue:{once}",
        "redisson_lock_timeout:{once}",
    ]);
    assert_eq!(exists, 0);
    holder.unlock().expect("unlock");
    assert_free(&b.fair_lock("once"));
}

#[test]
fn a_release_wakes_only_the_head_on_its_own_channel() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    let holder = a.fair_lock("head").lock().expect("lock");
    let (first, first_got) = fair_waiter(&b, "head", None, Duration::from_millis(600));
    queued(&server, "head", std::slice::from_ref(&first));
    let (second, second_got) = fair_waiter(&a, "head", None, Duration::ZERO);
    queued(&server, "head", &[first.clone(), second.clone()]);
    let mut watch = server.psubscriber(&["redisson_lock__channel*"]);
    // Both waiters parked on their own channels.
    for field in [&first, &second] {
        let channel = format!("redisson_lock__channel:{{head}}:{field}");
        assert!(eventually(Duration::from_secs(5), || {
            server
                .cmd::<(String, i64)>(&["PUBSUB", "NUMSUB", &channel])
                .1
                == 1
        }));
    }
    thread::sleep(Duration::from_millis(100));
    let released = Instant::now();
    holder.unlock().expect("unlock");
    // The head is woken, by its own message.
    served_within(
        &first_got,
        released,
        Duration::from_millis(200),
        Duration::from_secs(5),
    );
    let messages = watch.messages_within(Duration::from_millis(300));
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(
        messages[0].channel,
        format!("redisson_lock__channel:{{head}}:{first}")
    );
    assert_eq!(messages[0].payload, "0");
    assert!(
        second_got.try_recv().is_err(),
        "the second waiter jumped the head"
    );
    // The first holder's release wakes the second, now the head.
    let at = second_got
        .recv_timeout(Duration::from_secs(5))
        .expect("second")
        .expect("got it");
    let messages = watch.messages_within(Duration::from_millis(100));
    assert!(
        messages
            .iter()
            .any(|m| m.channel == format!("redisson_lock__channel:{{head}}:{second}")),
        "{messages:?}"
    );
    assert!(at.saturating_duration_since(released) >= Duration::from_millis(600));
}

#[test]
fn a_stale_head_is_purged_and_does_not_block_the_next_waiter() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.fair_lock("stale");
    // A waiter that died queued: its deadline passed already.
    let past = format!("{}", epoch_ms() as u64 - 1);
    let _: () = server.cmd(&["RPUSH", "redisson_lock_queue:{stale}", "dead:1"]);
    let _: () = server.cmd(&["ZADD", "redisson_lock_timeout:{stale}", &past, "dead:1"]);
    let guard = lock
        .try_lock()
        .expect("try_lock")
        .expect("the stale head blocked try-once");
    assert!(queue(&server, "stale").is_empty());
    assert_eq!(zset_len(&server, "stale"), 0);
    guard.unlock().expect("unlock");
    // One that dies 500 ms from now: the next waiter gets the lock soon after.
    let soon = format!("{}", epoch_ms() as u64 + 500);
    let _: () = server.cmd(&["RPUSH", "redisson_lock_queue:{stale}", "dead:2"]);
    let _: () = server.cmd(&["ZADD", "redisson_lock_timeout:{stale}", &soon, "dead:2"]);
    let (guard, took) = support::timed(|| lock.try_lock_for(Duration::from_secs(5)));
    let guard = guard
        .expect("try_lock_for")
        .expect("blocked by a dead head");
    assert!(
        took >= Duration::from_millis(400),
        "jumped a live head: {took:?}"
    );
    // Its waiter looks again 50, 100, 200, 400 ms apart: within a second
    // of the dead head's deadline.
    assert!(took < Duration::from_millis(2000), "took {took:?}");
    assert!(queue(&server, "stale").is_empty());
    assert_eq!(zset_len(&server, "stale"), 0);
    guard.unlock().expect("unlock");
}

#[test]
fn waiters_behind_a_dead_head_ask_again_less_and_less_often() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.fair_lock("dead-head");
    // A waiter that died queued, its deadline a minute away: the lock is
    // free, and not anyone else's turn until then.
    let later = format!("{}", epoch_ms() as u64 + 60_000);
    let _: () = server.cmd(&["RPUSH", "redisson_lock_queue:{dead-head}", "dead:1"]);
    let _: () = server.cmd(&[
        "ZADD",
        "redisson_lock_timeout:{dead-head}",
        &later,
        "dead:1",
    ]);
    let before = server.scripts_run();
    let got = lock
        .try_lock_for(Duration::from_secs(3))
        .expect("try_lock_for");
    assert!(got.is_none(), "jumped the queue");
    // Asked 50, 100, 200, 400, 800 and 1,000 ms apart: about ten scripts
    // (its attempts and its give-up), not sixty (every 50 ms) or thousands
    // (at once, as Redisson does).
    let run = server.scripts_run() - before;
    assert!(run <= 20, "{run} scripts in 3 s behind a dead head");
    queued(&server, "dead-head", &["dead:1".to_owned()]);
}

#[test]
fn a_lost_reply_to_a_queueing_acquire_queues_the_thread_once() {
    let (server, proxy) = Proxy::with_server();
    let direct = client(&server);
    let proxied = proxy.client();
    // Loads the acquire script, so that the dropped reply is the acquire's.
    let holder = direct.fair_lock("lost-queued").lock().expect("lock");
    proxy.arm("lost-queued", Fault::DropReplyAndClose);
    let (field, got) = fair_waiter(
        &proxied,
        "lost-queued",
        Some(Duration::from_secs(10)),
        Duration::ZERO,
    );
    queued(&server, "lost-queued", std::slice::from_ref(&field));
    assert!(eventually(Duration::from_secs(5), || proxy.injected() == 1));
    thread::sleep(Duration::from_millis(200));
    assert_eq!(queue(&server, "lost-queued"), vec![field.clone()]);
    assert_eq!(zset_len(&server, "lost-queued"), 1);
    holder.unlock().expect("unlock");
    assert!(
        got.recv_timeout(Duration::from_secs(5))
            .expect("served")
            .is_some()
    );
    assert!(eventually(Duration::from_secs(5), || {
        !direct
            .fair_lock("lost-queued")
            .is_locked()
            .expect("is_locked")
    }));
    assert!(queue(&server, "lost-queued").is_empty());
}

#[test]
fn a_lost_reply_to_a_reentry_after_the_hold_was_gone_reports_it_replaced() {
    let (server, proxy, client) = Proxy::with_client();
    let lock = client.fair_lock("replaced");
    let first = lock.lock().expect("lock");
    lock.lock()
        .expect("warm the reentry")
        .unlock()
        .expect("unlock");
    let _: () = server.cmd(&["DEL", "replaced"]);
    let second = proxy.losing_the_reply_to("replaced", || lock.lock().expect("lock again"));
    assert_eq!(first.lost_reason(), Some(LostReason::Replaced));
    assert_eq!(lock.hold_count().expect("count"), 1);
    second.unlock().expect("unlock");
    assert_no_phantom_hold(&lock);
}

#[test]
fn keys_values_and_deadlines_are_redissons() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    let holder = a.fair_lock("wire").lock().expect("lock");
    let holder_field = a.owner_field();
    let hash: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", "wire"]);
    assert_eq!(hash, [(holder_field, "1".to_owned())].into());
    let pttl = pttl(&server, "wire");
    assert!(pttl > 29_000, "PTTL {pttl}");
    // lock(): waitMs is fairLockWaitTimeout (300 s); the deadline is
    // now + PTTL + waitMs.
    let joined = epoch_ms();
    let (w1, w1_got) = fair_waiter(&b, "wire", None, Duration::from_millis(500));
    queued(&server, "wire", std::slice::from_ref(&w1));
    let s1 = score(&server, "wire", &w1).expect("deadline");
    let expected = joined + 30_000.0 + 300_000.0;
    assert!(
        (s1 - expected).abs() < 1_500.0,
        "deadline {s1}, expected ~{expected}"
    );
    // try_lock_for(10 s) behind it: base = the tail's deadline - now, so its
    // deadline is the tail's + its own wait.
    let (w2, w2_got) = fair_waiter(&a, "wire", Some(Duration::from_secs(10)), Duration::ZERO);
    queued(&server, "wire", &[w1.clone(), w2.clone()]);
    let s2 = score(&server, "wire", &w2).expect("deadline");
    assert!((9_900.0..=10_000.0).contains(&(s2 - s1)), "{s2} - {s1}");
    // When the head takes the lock, everyone left is moved up by its waitMs.
    holder.unlock().expect("unlock");
    assert!(
        w1_got
            .recv_timeout(Duration::from_secs(5))
            .expect("w1")
            .is_some()
    );
    assert!(eventually(Duration::from_secs(5), || queue(
        &server, "wire"
    ) == vec![w2.clone()]));
    let moved = score(&server, "wire", &w2).expect("deadline");
    assert_eq!(s2 - moved, 300_000.0);
    assert!(
        w2_got
            .recv_timeout(Duration::from_secs(5))
            .expect("w2")
            .is_some()
    );
    // Names with a brace are used verbatim, as for every Redisson key.
    let braced = a.fair_lock("{user}:1").lock().expect("lock");
    let (w3, _w3_got) = fair_waiter(&b, "{user}:1", Some(Duration::from_secs(1)), Duration::ZERO);
    assert!(eventually(Duration::from_secs(5), || {
        server.cmd::<Vec<String>>(&["LRANGE", "redisson_lock_queue:{user}:1", "0", "-1"])
            == vec![w3.clone()]
    }));
    let braced_score: Option<f64> = server.cmd(&["ZSCORE", "redisson_lock_timeout:{user}:1", &w3]);
    assert!(braced_score.is_some());
    braced.unlock().expect("unlock");
}

#[test]
fn the_wait_timeout_setting_is_the_queued_deadline() {
    let server = RedisServer::start();
    let holder = client(&server);
    let short = Client::builder(server.url())
        .fair_lock_wait_timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let guard = holder
        .fair_lock("setting")
        .with_lease(Duration::from_secs(20))
        .lock()
        .expect("lock");
    let joined = epoch_ms();
    let (w, _got) = fair_waiter(&short, "setting", None, Duration::ZERO);
    queued(&server, "setting", std::slice::from_ref(&w));
    let s = score(&server, "setting", &w).expect("deadline");
    let expected = joined + 20_000.0 + 2_000.0;
    assert!(
        (s - expected).abs() < 1_000.0,
        "deadline {s}, expected ~{expected}"
    );
    guard.unlock().expect("unlock");
    assert!(matches!(
        Client::builder(server.url())
            .fair_lock_wait_timeout(Duration::ZERO)
            .build(),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn redissons_unlock_of_an_absent_fair_lock_succeeds() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.fair_lock("absent");
    let outcome = lock
        .unlock_with_request_id(&RequestId::new())
        .expect("unlock");
    assert_eq!(outcome, UnlockOutcome::Released);
    // The guards' release reports a vanished hold as not held.
    let guard = lock.lock().expect("lock");
    let _: () = server.cmd(&["DEL", "absent"]);
    assert!(matches!(guard.unlock(), Err(Error::NotHeld { .. })));
}

#[test]
fn a_non_reentrant_fair_lock_takes_its_own_phantom_field_afresh() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.non_reentrant_fair_lock("phantom");
    // What a lost acquire reply leaves: this thread's field, no hold counted.
    let field = client.owner_field();
    let _: () = server.cmd(&["HSET", "phantom", &field, "1"]);
    let _: () = server.cmd(&["PEXPIRE", "phantom", "30000"]);
    let guard = lock.lock().expect("lock");
    assert_eq!(lock.hold_count().expect("count"), 1);
    assert!(matches!(lock.try_lock(), Err(Error::NotReentrant { .. })));
    guard.unlock().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
}

#[test]
fn a_wait_that_ends_in_an_error_leaves_the_queue() {
    // A waiter whose lock() fails (here: the key becomes another type, so
    // its next attempt gets WRONGTYPE) must not keep its place: everyone
    // behind it would wait out its deadline (5 min by default).
    let (server, holder, waiter) = RedisServer::start_with_two_clients();
    let guard = holder.fair_lock("errs").lock().expect("lock");
    let lock = waiter.fair_lock("errs");
    let waiting = std::thread::spawn(move || lock.lock().map(drop));
    // Queued, then subscribed to its own channel (in that order).
    let channels = || -> Vec<String> {
        server.cmd(&["PUBSUB", "CHANNELS", "redisson_lock__channel:{errs}:*"])
    };
    assert!(support::eventually(Duration::from_secs(5), || {
        server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{errs}"]) == 1 && !channels().is_empty()
    }));
    let channels = channels();
    assert_eq!(channels.len(), 1, "{channels:?}");
    // The key becomes another type while held; the waiter is woken on its
    // own channel (unless a retry of its own got there first) and its next
    // attempt fails.
    let _: () = server.cmd(&["SET", "errs", "not a lock"]);
    let _: i64 = server.cmd(&["PUBLISH", &channels[0], "0"]);
    let result = waiting.join().expect("waiter thread");
    drop(guard);
    assert!(result.is_err(), "{result:?}");
    let queued: i64 = server.cmd(&["LLEN", "redisson_lock_queue:{errs}"]);
    let scored: i64 = server.cmd(&["ZCARD", "redisson_lock_timeout:{errs}"]);
    assert_eq!((queued, scored), (0, 0), "the failed waiter kept its place");
}

/// Regression: the wait a timed waiter queued and gave up with was
/// recomputed from its deadline and truncated (999 ms for a 1 s
/// `try_lock_for`), so each Rust give-up moved Java waiters' deadlines 1 ms
/// less than Redisson's would. It is the caller's wait as given.
#[test]
fn a_give_up_lowers_those_behind_by_exactly_the_callers_wait() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    for wait in [Duration::from_millis(1000), Duration::from_millis(333)] {
        let name = format!("exact-wait-{}", wait.as_millis());
        let holder = a.fair_lock(&name).lock().expect("lock");
        let (quitter, quitter_got) = fair_waiter(&b, &name, Some(wait), Duration::ZERO);
        queued(&server, &name, std::slice::from_ref(&quitter));
        let (patient, patient_got) = fair_waiter(&a, &name, None, Duration::ZERO);
        queued(&server, &name, &[quitter.clone(), patient.clone()]);
        let before = score(&server, &name, &patient).expect("patient's deadline");
        let gave_up = quitter_got.recv_timeout(Duration::from_secs(10));
        assert_eq!(gave_up.expect("gave up"), None);
        queued(&server, &name, std::slice::from_ref(&patient));
        let after = score(&server, &name, &patient).expect("patient's deadline");
        assert_eq!(before - after, wait.as_millis() as f64, "wait {wait:?}");
        holder.unlock().expect("unlock");
        let served = patient_got.recv_timeout(Duration::from_secs(10));
        assert!(served.expect("served").is_some());
    }
}
