//! The races users hit, made deterministic with fail points (feature
//! `failpoints`: `cargo test --features failpoints --test failpoints`).
//! Each test stops one thread of the crate at a named point of its code
//! (tikv's `fail` crate), does the racing thing there, and lets it go on.
//!
//! - `renewal-before-send`: an unlock between the watchdog's collection of
//!   the holds to renew and its send (a renewal in flight when the guard
//!   is released): the released hold must never read as lost.
//! - `renewal-before-send` with `release-after-reply`: a renewal sent
//!   before the unlock and run by Redis after it, whose reply the watchdog
//!   reads before the releasing thread reads the unlock's: the renewal finds
//!   the field gone, and the released hold must still never read as lost
//!   (the torture's histories caught its lost signal firing there).
//! - `waiter-before-park`: the subscriber's connection killed, and the lock
//!   released (its message published to nobody), after a waiter's failed
//!   attempt and before it parks: the waiter must still get the lock
//!   promptly, not after the holder's lease.
//! - `reply-lost` (in a pooled connection's request, after the write, and
//!   in the multiplexed leader's read; configured `1*return`): the command
//!   was written and runs in Redis, its reply is read as a connection
//!   reset. The command must be sent once more, flagged as a resend, and
//!   counted once: an acquire (hold count 1 in the hash, one unlock frees
//!   it), a reentry that took a lost lock afresh (its resend finds the
//!   marker: still a fresh hold, count 1, not a reentry), a partial and a
//!   last release (one hold released each, never a second). Each pooled
//!   and multiplexed.
//! - `script-before-send` (between the choice of `EVALSHA` and its send):
//!   `SCRIPT FLUSH` there, a failover's fresh master without the scripts.
//!   The `NOSCRIPT` loads the script and the command runs once: a reentry
//!   counts 2, a latch's count-down (not idempotent) counts down one, and
//!   the callers get their normal results. Pooled and multiplexed.
//!
//! - `renewal-before-send` set to `sleep(600)`: a renewal run that takes
//!   most of a period (as a million locks' does). The next run starts a
//!   period after this one started, not after it ended: a lock is renewed
//!   every third of its lease, however long a run takes.
//!
//! - `renewal-before-send` sleeping 2 s a round, under a run of ten
//!   rounds: a shutdown sends none of the run's later rounds (it waits
//!   for those in flight only).
//!
//! - `renewal-before-send` held while a guard's `keep_for` runs: a renewal
//!   answered after `keep_for`'s first wait for it gave up must not leave
//!   the key a watchdog lease (its PEXPIRE is sent again: the TTL is at
//!   most what was asked); one in flight throughout is an
//!   `Error::Unavailable`, never an `Ok` with the lease unknown.
//!
//! - `read-trickle` (every read of the crate's sockets waits and brings
//!   one byte): a reply trickled over seconds fails at the response
//!   timeout, pooled and multiplexed (issue 29 item 6).
//!
//! And one race with no fail point of its own: a reply cut mid-way by the
//! response timeout (the test proxy's `Fault::SplitReply` forwards its
//! first bytes and holds the rest until the caller timed out). The caller
//! gets a timeout, the command is never sent again, and the next command
//! on the client reads its own reply, not the late tail. Pooled (one
//! connection) and multiplexed (one socket).

mod support;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use redisson_lock::{Client, Error, LockGuard, LostReason, OwnedLockGuard};
use support::RedisServer;
use support::monitor::monitor_evalsha;
use support::proxy::{Fault, Proxy};

/// The fail points are process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_release_during_a_renewal_in_flight_is_never_read_as_lost() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = server.watchdog_client(watchdog);
    let guard = client.lock("raced").lock_owned().expect("lock");
    let signal = guard.lost_signal();
    // The watchdog stops at its next round, after it took the hold.
    let (stopped, go_tx) = pause_once("renewal-before-send");
    stopped
        .recv_timeout(watchdog * 3)
        .expect("the watchdog reached the fail point");
    // Released while the renewal is about to go out.
    guard.unlock().expect("unlock");
    go_tx.send(()).expect("go");
    // The renewal lands after the release: it finds the field gone.
    thread::sleep(watchdog);
    fail::remove("renewal-before-send");
    assert!(
        !signal.is_lost(),
        "a released lock reads as lost: {:?}",
        signal.reason()
    );
    assert_eq!(signal.reason(), None);
    assert_eq!(signal.wait_timeout(Duration::ZERO), None);
    let exists: i64 = server.cmd(&["EXISTS", "raced"]);
    assert_eq!(exists, 0, "the renewal brought the lock back");
    scenario.teardown();
}

#[test]
fn a_renewal_answered_between_the_unlock_and_its_reply_is_never_read_as_lost() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .build()
        .expect("client");
    let guard = client.lock("crossed").lock_owned().expect("lock");
    let signal = guard.lost_signal();
    // The watchdog stops at its next round, with the hold taken for renewal.
    let (renewal_stopped, renewal_go_tx) = pause_once("renewal-before-send");
    renewal_stopped
        .recv_timeout(watchdog * 3)
        .expect("the watchdog reached its fail point");
    // The release runs in Redis, then stops before reading its reply.
    let (release_stopped, release_go_tx) = pause_once("release-after-reply");
    let releasing = thread::spawn(move || guard.unlock());
    release_stopped
        .recv_timeout(Duration::from_secs(10))
        .expect("the release reached its fail point");
    let exists: i64 = server.cmd(&["EXISTS", "crossed"]);
    assert_eq!(exists, 0, "the unlock ran");
    // The renewal goes out now, after the unlock ran, and its answer (the
    // field is gone) is read while the release has not read its own.
    renewal_go_tx.send(()).expect("go");
    let lost_meanwhile = signal.wait_timeout(watchdog / 2);
    release_go_tx.send(()).expect("go");
    let released = releasing.join().expect("the releasing thread");
    fail::remove("renewal-before-send");
    fail::remove("release-after-reply");
    released.expect("the release succeeded");
    assert_eq!(
        lost_meanwhile, None,
        "the lost signal fired for a hold whose release succeeded"
    );
    assert!(!signal.is_lost(), "reads as lost: {:?}", signal.reason());
    assert_eq!(signal.reason(), None);
    scenario.teardown();
}

#[test]
fn a_loss_a_renewal_found_during_an_inferred_release_is_still_signalled() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = Client::builder(server.url())
        .pool_size(2)
        .watchdog_timeout(watchdog)
        .build()
        .expect("client");
    let guard = client.lock("gone-first").lock_owned().expect("lock");
    let signal = guard.lost_signal();
    let (renewal_stopped, renewal_go_tx) = pause_once("renewal-before-send");
    renewal_stopped
        .recv_timeout(watchdog * 3)
        .expect("the watchdog reached its fail point");
    // The lock is lost behind the client's back (a failover that lost it,
    // an operator's DEL) while the renewal waits to go out.
    let _: i64 = server.cmd(&["DEL", "gone-first"]);
    // The release finds the field gone, its reply is lost, and its flagged
    // resend finds the field gone too: read as "the first one freed it".
    let (release_stopped, release_go_tx) = pause_once("release-after-reply");
    fail::cfg("reply-lost", "1*return").expect("fail point");
    let releasing = thread::spawn(move || guard.unlock());
    release_stopped
        .recv_timeout(Duration::from_secs(10))
        .expect("the release reached its fail point");
    fail::remove("reply-lost");
    // The renewal finds the field gone and is answered first.
    renewal_go_tx.send(()).expect("go");
    thread::sleep(watchdog / 2);
    release_go_tx.send(()).expect("go");
    let released = releasing.join().expect("the releasing thread");
    fail::remove("renewal-before-send");
    fail::remove("release-after-reply");
    released.expect("the release, inferred");
    assert_eq!(
        signal.reason(),
        Some(LostReason::KeyGone),
        "a lock lost before its release (the renewal saw it gone, the release only inferred it freed it) was never signalled"
    );
    scenario.teardown();
}

#[test]
fn a_subscription_lost_before_the_waiter_parks_does_not_cost_it_the_lease() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let (server, holder, waiter) = RedisServer::start_with_two_clients();
    let lock = waiter.lock("parked");
    let held: Arc<Mutex<Option<OwnedLockGuard>>> = Arc::new(Mutex::new(Some(
        holder.lock("parked").lock_owned().expect("hold"),
    )));
    // At the waiter's first park: its subscriber's connection is killed and
    // the lock released (the unlock message reaches no subscriber), then it
    // parks on a 30 s lease's TTL.
    let port = server.port();
    let once = Mutex::new(Some(Arc::clone(&held)));
    fail::cfg_callback("waiter-before-park", move || {
        let Some(held) = once.lock().expect("once").take() else {
            return;
        };
        let mut admin = support::sentinel::con(port);
        let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "pubsub"])
            .query(&mut admin);
        if let Some(guard) = held.lock().expect("held").take() {
            guard.unlock().expect("the holder's release");
        }
    })
    .expect("fail point");
    let (guard, took) = support::timed(|| lock.try_lock_for(Duration::from_secs(20)));
    let guard = guard
        .expect("try_lock_for")
        .expect("the lock, once released");
    fail::remove("waiter-before-park");
    assert!(
        held.lock().expect("held").is_none(),
        "the fail point never ran"
    );
    assert!(
        took < Duration::from_secs(5),
        "the waiter slept {took:?}: the release it missed cost it the holder's lease"
    );
    drop(guard);
    scenario.teardown();
}

/// A client of `server` on pooled connections and one multiplexed on one
/// socket, whatever the environment: `reply-lost` is in both readers.
fn both_modes(server: &RedisServer) -> [(&'static str, Client); 2] {
    let build = |builder: redisson_lock::ClientBuilder| builder.build().expect("client");
    [
        ("pooled", build(Client::builder(server.url()).pool_size(2))),
        (
            "multiplexed",
            build(Client::builder(server.url()).multiplexed(1)),
        ),
    ]
}

/// The counts of the lock hash `name`'s fields, as Redis has them.
fn counts(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&["HVALS", name])
}

/// Runs `call` with `reply-lost` armed for one pass: the command it sends
/// is written (Redis runs it), and its reply read as a connection reset.
/// Asserts that the command was run twice: once, then resent once (its
/// script must be in the server's cache already: a `NOSCRIPT` runs nothing).
fn losing_the_reply<T>(server: &RedisServer, call: impl FnOnce() -> T) -> T {
    let sent = server.command_calls("evalsha");
    fail::cfg("reply-lost", "1*return").expect("fail point");
    let result = call();
    fail::remove("reply-lost");
    assert_eq!(
        server.command_calls("evalsha") - sent,
        2,
        "the command ran once, lost its reply, and was resent once (evalsha calls from {sent})"
    );
    result
}

#[test]
fn an_acquire_whose_reply_is_lost_is_resent_and_counted_once() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    for (mode, client) in both_modes(&server) {
        let name = format!("lost-acquire-{mode}");
        // A lease: no watchdog thread on the connections.
        let lock = client.lock(&name).with_lease(Duration::from_secs(30));
        lock.lock().expect("warm-up").unlock().expect("warm-up");
        let guard = losing_the_reply(&server, || lock.lock())
            .expect("the lock, once its lost reply is resent");
        assert_eq!(counts(&server, &name), ["1"], "{mode}: counted twice");
        guard.unlock().expect("unlock");
        let exists: i64 = server.cmd(&["EXISTS", &name]);
        assert_eq!(exists, 0, "{mode}: one unlock left the lock held");
    }
    scenario.teardown();
}

#[test]
fn a_reentry_whose_reply_is_lost_after_the_hold_was_lost_is_not_a_reentry() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    for (mode, client) in both_modes(&server) {
        let name = format!("lost-retake-{mode}");
        let lock = client.lock(&name).with_lease(Duration::from_secs(30));
        let first = lock.lock().expect("lock");
        // The hold is lost behind the client's back (expired, deleted).
        let _: i64 = server.cmd(&["DEL", &name]);
        // The reentry takes the lock afresh (`-3`, its marker left
        // behind), and its reply is lost: the flagged resend must find the
        // marker and answer `-3` again, not count the fresh hold as a
        // reentry.
        let second = losing_the_reply(&server, || lock.lock()).expect("the lock, taken afresh");
        assert_eq!(
            counts(&server, &name),
            ["1"],
            "{mode}: the resend counted the fresh hold as a reentry"
        );
        assert!(
            first.is_lost(),
            "{mode}: the first hold does not read as lost"
        );
        drop(first);
        second.unlock().expect("unlock");
        let exists: i64 = server.cmd(&["EXISTS", &name]);
        assert_eq!(
            exists, 0,
            "{mode}: the fresh hold's unlock left the lock held"
        );
    }
    scenario.teardown();
}

#[test]
fn a_release_whose_reply_is_lost_releases_once() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    for (mode, client) in both_modes(&server) {
        let name = format!("lost-release-{mode}");
        let lock = client.lock(&name).with_lease(Duration::from_secs(30));
        lock.lock().expect("warm-up").unlock().expect("warm-up");
        let outer = lock.lock().expect("lock");
        let inner = lock.lock().expect("reentry");
        assert_eq!(counts(&server, &name), ["2"]);
        // A partial release: run, reply lost, resent; one hold released.
        losing_the_reply(&server, || inner.unlock()).expect("the partial release, resent");
        assert_eq!(
            counts(&server, &name),
            ["1"],
            "{mode}: the resent release released a second hold"
        );
        // The last release: run (the key deleted), reply lost, resent (the
        // field found gone): released, once.
        losing_the_reply(&server, || outer.unlock()).expect("the last release, resent");
        let exists: i64 = server.cmd(&["EXISTS", &name]);
        assert_eq!(exists, 0, "{mode}: the lock is still held");
    }
    scenario.teardown();
}

/// Arms `script-before-send` for one pass: the server's script cache is
/// flushed (`SCRIPT FLUSH`, as on a master that a failover just promoted)
/// between the client's choice of `EVALSHA` and its send. Returns whether
/// it ran.
fn flushing_the_scripts_once(server: &RedisServer) -> Arc<Mutex<bool>> {
    let flushed = Arc::new(Mutex::new(false));
    let port = server.port();
    let done = Arc::clone(&flushed);
    fail::cfg_callback("script-before-send", move || {
        let mut done = done.lock().expect("flushed");
        if !*done {
            let mut admin = support::sentinel::con(port);
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query(&mut admin)
                .expect("SCRIPT FLUSH");
            *done = true;
        }
    })
    .expect("fail point");
    flushed
}

#[test]
fn a_script_cache_flushed_before_evalsha_runs_the_command_once() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    for (mode, client) in both_modes(&server) {
        // A reentry: the count set once, the caller told it holds the lock.
        let name = format!("flushed-{mode}");
        let lock = client.lock(&name).with_lease(Duration::from_secs(30));
        let outer = lock.lock().expect("lock");
        let sent = server.command_calls("evalsha");
        let flushed = flushing_the_scripts_once(&server);
        let inner = lock.lock().expect("the reentry, after NOSCRIPT");
        fail::remove("script-before-send");
        assert!(*flushed.lock().expect("flushed"), "{mode}: never flushed");
        assert_eq!(
            server.command_calls("evalsha") - sent,
            2,
            "{mode}: NOSCRIPT, then the reentry once"
        );
        assert_eq!(counts(&server, &name), ["2"], "{mode}: reentry counted");
        inner.unlock().expect("unlock");
        outer.unlock().expect("unlock");
        let exists: i64 = server.cmd(&["EXISTS", &name]);
        assert_eq!(exists, 0, "{mode}: still held");
        // A count-down (not idempotent): one decrement, and `Ok`.
        let latch = client.count_down_latch(format!("flushed-latch-{mode}"));
        assert!(latch.try_set_count(3).expect("try_set_count"));
        let flushed = flushing_the_scripts_once(&server);
        latch.count_down().expect("the count-down, after NOSCRIPT");
        fail::remove("script-before-send");
        assert!(*flushed.lock().expect("flushed"), "{mode}: never flushed");
        assert_eq!(latch.count().expect("count"), 2, "{mode}: counted down");
    }
    scenario.teardown();
}

#[test]
fn a_reply_cut_by_the_response_timeout_is_not_resent_and_its_tail_never_read() {
    let _serial = serial();
    let (server, proxy) = Proxy::with_server();
    // Held by another client: an acquire's reply is its TTL (`:29…`).
    let holder = server.client();
    let _held = holder.lock("cut").lock().expect("hold");
    let response_timeout = Duration::from_millis(300);
    for (mode, builder) in [
        ("pooled", Client::builder(proxy.url()).pool_size(1)),
        ("multiplexed", Client::builder(proxy.url()).multiplexed(1)),
    ] {
        let client = builder
            .response_timeout(response_timeout)
            .build()
            .expect("client");
        let free_name = format!("free-{mode}");
        let free = client.lock(&free_name).with_lease(Duration::from_secs(30));
        free.lock().expect("warm-up").unlock().expect("warm-up");
        let cut = client.lock("cut").with_lease(Duration::from_secs(30));
        let marker = "\r\ncut\r\n";
        let sent = proxy.requests_containing(marker);
        let injected = proxy.injected();
        // Its reply's first 3 bytes come, then nothing: a timeout mid-reply.
        proxy.arm(marker, Fault::SplitReply(3));
        let (cut_short, took) = support::timed(|| cut.try_lock());
        let Err(e) = cut_short else {
            panic!("{mode}: no timeout: the command was sent again after it, {cut_short:?}");
        };
        assert!(
            matches!(e, Error::Timeout { .. }),
            "{mode}: expected a timeout (outcome unknown), got {e:?}"
        );
        assert!(
            took < response_timeout * 3,
            "{mode}: the timeout took {took:?}"
        );
        assert_eq!(proxy.injected(), injected + 1, "{mode}: never cut");
        // The tail arrives late, on the connection the caller gave up on.
        proxy.release_tail(Duration::from_secs(5));
        thread::sleep(Duration::from_millis(50));
        assert_eq!(
            proxy.requests_containing(marker),
            sent + 1,
            "{mode}: the command was sent again after its timeout"
        );
        // The client's next command reads its own reply, not that tail (a
        // TTL that would read as "held by someone").
        let guard = free
            .try_lock()
            .expect("the next command")
            .unwrap_or_else(|| panic!("{mode}: the next command read the stale tail"));
        assert_eq!(counts(&server, &free_name), ["1"], "{mode}");
        guard.unlock().expect("unlock");
        let exists: i64 = server.cmd(&["EXISTS", &free_name]);
        assert_eq!(exists, 0, "{mode}: the unlock read another reply");
        assert_eq!(
            proxy.requests_containing(marker),
            sent + 1,
            "{mode}: resent"
        );
    }
}

/// Issue 29 item 6: the response timeout bounds a whole reply, not each
/// read. `read-trickle` makes every read of the crate's sockets wait 30 ms
/// and bring one byte: a server trickling a reply of ~150 bytes over
/// seconds, each read well inside the timeout. The call must fail at about
/// the response timeout (outcome unknown), not succeed seconds later.
#[test]
fn a_reply_trickled_a_byte_a_read_times_out_at_the_response_timeout() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    let response_timeout = Duration::from_millis(300);
    for (mode, builder) in [
        ("pooled", Client::builder(server.url()).pool_size(1)),
        ("multiplexed", Client::builder(server.url()).multiplexed(1)),
    ] {
        let client = builder
            .response_timeout(response_timeout)
            .build()
            .expect("client");
        let name = format!("trickled-{mode}");
        let guard = client.lock(&name).lock().expect("hold");
        let info = client.inspect(&name).expect("inspect, promptly");
        assert_eq!(info.holders.len(), 1, "{mode}");
        fail::cfg("read-trickle", "return(30)").expect("fail point");
        let (trickled, took) = support::timed(|| client.inspect(&name));
        fail::remove("read-trickle");
        let Err(e) = trickled else {
            panic!("{mode}: a reply trickled over {took:?} was taken whole (per-read timeout)");
        };
        assert!(
            matches!(e, Error::Timeout { .. }),
            "{mode}: expected a timeout, got {e:?}"
        );
        assert!(
            took < response_timeout * 4,
            "{mode}: the timeout came after {took:?}"
        );
        // The client goes on, on a fresh connection.
        assert_eq!(client.inspect(&name).expect("inspect").holders.len(), 1);
        guard.unlock().expect("unlock");
    }
    scenario.teardown();
}

/// Stops the first thread that reaches fail point `name` there, until the
/// returned sender sends (or 10 s pass); the receiver hears when it got
/// there.
fn pause_once(name: &str) -> (mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (stopped_tx, stopped) = mpsc::channel::<()>();
    let (go_tx, go) = mpsc::channel::<()>();
    let go = Mutex::new(go);
    let once = Mutex::new(Some(stopped_tx));
    fail::cfg_callback(name, move || {
        if let Some(stopped) = once.lock().expect("once").take() {
            let _ = stopped.send(());
            let _ = go.lock().expect("go").recv_timeout(Duration::from_secs(10));
        }
    })
    .expect("fail point");
    (stopped, go_tx)
}

#[test]
fn a_long_renewal_run_does_not_put_the_next_one_off() {
    let _serial = serial();
    let server = RedisServer::start();
    // A renewal every second; each run spends 600 ms before its send.
    let watchdog = Duration::from_secs(3);
    let client = server.watchdog_client(watchdog);
    let guard = client.lock("slow-runs").lock().expect("lock");
    fail::cfg("renewal-before-send", "sleep(600)").expect("fail point");
    // From here on every EVALSHA is a renewal of the one lock (the first
    // sent twice, its script loaded after a NOSCRIPT).
    let runs = |calls: &[support::monitor::Call]| -> Vec<u64> {
        let mut starts: Vec<u64> = Vec::new();
        for call in calls {
            if starts
                .last()
                .is_none_or(|&last| call.at_us - last > 100_000)
            {
                starts.push(call.at_us);
            }
        }
        starts
    };
    let seen = monitor_evalsha(&server, Duration::from_secs(8), |calls| {
        runs(calls).len() >= 4
    });
    fail::remove("renewal-before-send");
    let runs = runs(&seen);
    assert!(
        runs.len() >= 4,
        "{} renewal runs in 8 s: {seen:?}",
        runs.len()
    );
    let gaps: Vec<Duration> = runs
        .windows(2)
        .map(|pair| Duration::from_micros(pair[1] - pair[0]))
        .collect();
    println!("renewals apart: {gaps:?}");
    for gap in &gaps {
        // A period (1 s) apart; 1.6 s when the next run waited a period
        // from the end of the last.
        assert!(
            *gap > Duration::from_millis(800) && *gap < Duration::from_millis(1350),
            "renewals {gaps:?} apart, each run 600 ms long"
        );
    }
    assert!(!guard.is_lost());
}

#[test]
fn a_shutdown_during_a_long_renewal_run_sends_no_more_of_its_rounds() {
    let _serial = serial();
    let server = RedisServer::start();
    // 20,000 locks: ten rounds of 2,000 (20 calls of 100) per run.
    let client = server.watchdog_client(Duration::from_secs(6));
    let lock = |i: usize| client.lock(format!("run-{i}")).lock().expect("lock");
    let guards: Vec<_> = (0..20_000).map(lock).collect();
    // Each round now takes 2 s before its send: a 10 s run on two lines.
    let rounds = Arc::new(Mutex::new(0usize));
    let (started_tx, started) = mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    {
        let rounds = Arc::clone(&rounds);
        fail::cfg_callback("renewal-before-send", move || {
            *rounds.lock().expect("rounds") += 1;
            let _ = started_tx.lock().expect("started").send(());
            thread::sleep(Duration::from_secs(2));
        })
        .expect("fail point");
    }
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("a renewal run within a period");
    client.shutdown(Duration::ZERO).expect("shutdown");
    let sent = *rounds.lock().expect("rounds");
    fail::remove("renewal-before-send");
    drop(guards);
    // The shutdown releases 20,000 holds (seconds), then stops the
    // watchdog: the rounds in flight end, no later one is sent.
    println!("{sent} of the run's 10 rounds sent before the shutdown returned");
    assert!(
        sent < 10,
        "the shutdown waited for the whole run ({sent} rounds)"
    );
}

/// Takes `name` on a client renewing every 2 s whose replies time out
/// after 200 ms (its `keep_for` waits at most 400 ms a try for a renewal in
/// flight), and stops the watchdog's next renewal (a 6 s lease) before its
/// send: it goes on when the returned sender sends.
fn held_with_a_renewal_stopped(
    server: &RedisServer,
    name: &str,
) -> (Client, LockGuard, mpsc::Sender<()>) {
    held_with_the_watchdog_stopped_at(server, name, "renewal-before-send")
}

/// A lock held on a client with a 6 s watchdog (a renewal every 2 s) and a
/// 200 ms response timeout, its first renewal run stopped at `point`; the
/// sender lets it go on.
fn held_with_the_watchdog_stopped_at(
    server: &RedisServer,
    name: &str,
    point: &str,
) -> (Client, LockGuard, mpsc::Sender<()>) {
    let client = Client::builder(server.url())
        .watchdog_timeout(Duration::from_secs(6))
        .response_timeout(Duration::from_millis(200))
        .build()
        .expect("client");
    let guard = client.lock(name).lock().expect("lock");
    let (stopped, go_tx) = pause_once(point);
    stopped
        .recv_timeout(Duration::from_secs(6))
        .expect("the watchdog reached the fail point");
    (client, guard, go_tx)
}

/// Once what may renew it has run: `name`'s TTL is within `lease`.
fn assert_kept_within(server: &RedisServer, name: &str, lease: Duration) {
    let ttl: i64 = server.cmd(&["PTTL", name]);
    assert!(
        ttl > 0 && ttl <= lease.as_millis() as i64,
        "the key's TTL is {ttl} ms after keep_for({lease:?}): a renewal outlasted it"
    );
}

#[test]
fn a_renewal_answered_after_keep_for_s_first_wait_does_not_outlast_its_lease() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    // The renewal goes on 700 ms later: after keep_for's first wait for it
    // gave up.
    let (_client, guard, go_tx) = held_with_a_renewal_stopped(&server, "kept");
    let going = thread::spawn(move || {
        thread::sleep(Duration::from_millis(700));
        go_tx.send(()).expect("go");
    });
    let lease = Duration::from_secs(2);
    guard.keep_for(lease).expect("keep_for");
    going.join().expect("the go thread");
    fail::remove("renewal-before-send");
    thread::sleep(Duration::from_millis(100));
    assert_kept_within(&server, "kept", lease);
    scenario.teardown();
}

#[test]
fn a_hold_kept_after_the_renewal_run_collected_it_is_not_renewed() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    // The run has collected the hold (a million locks' run is seconds long
    // before its last round); its round has not begun.
    let (_client, guard, go_tx) =
        held_with_the_watchdog_stopped_at(&server, "collected", "renewal-before-begin");
    let lease = Duration::from_secs(2);
    guard.keep_for(lease).expect("keep_for");
    go_tx.send(()).expect("go");
    fail::remove("renewal-before-begin");
    thread::sleep(Duration::from_millis(300));
    assert_kept_within(&server, "collected", lease);
    scenario.teardown();
}

#[test]
fn keep_for_waits_for_a_renewal_in_flight_before_its_pexpire() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    // The renewal goes on 150 ms later: within keep_for's wait for it.
    let (_client, guard, go_tx) = held_with_a_renewal_stopped(&server, "waited");
    let before = server.scripts_run();
    let going = thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        go_tx.send(()).expect("go");
    });
    guard.keep_for(Duration::from_secs(2)).expect("keep_for");
    going.join().expect("the go thread");
    fail::remove("renewal-before-send");
    // Sent at once, the PEXPIRE would race the renewal and be sent again.
    assert_eq!(
        server.scripts_run() - before,
        2,
        "the renewal and one PEXPIRE, sent after it"
    );
    scenario.teardown();
}

#[test]
fn keep_for_gives_up_on_a_renewal_that_stays_in_flight() {
    let _serial = serial();
    let scenario = fail::FailScenario::setup();
    let server = RedisServer::start();
    let (_client, guard, go_tx) = held_with_a_renewal_stopped(&server, "unsure");
    // Three tries of twice 400 ms each, the renewal in flight throughout
    // (and the lease longer than them: no try finds the key expired).
    let result = guard.keep_for(Duration::from_secs(10));
    go_tx.send(()).expect("go");
    fail::remove("renewal-before-send");
    assert!(
        matches!(result, Err(Error::Unavailable { .. })),
        "keep_for with a renewal in flight throughout: {result:?}"
    );
    scenario.teardown();
}
