//! `Client::shutdown` (issue 33 item 2): waiting threads get
//! `Error::Closed` promptly, later acquisitions too without touching the
//! server, guards are released by their threads until the timeout and by
//! the shutdown after it (lost, `LostReason::Shutdown`), and once it
//! returns the client sends nothing and its threads are gone.
//!
//! The tests count the process's threads, so they run one at a time.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redisson_lock::{Error, EventHandler, LockEvent, LostReason};
use support::state::{channel, numsub, queue};
use support::{RedisServer, assert_waiting, eventually};

/// One test at a time: the thread counts are the process's.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The process's threads now (`/proc/self/task`).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("list /proc/self/task")
        .count()
}

/// Threads of this process whose name starts with `rlock-`.
fn client_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("list /proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_owned())
        .filter(|comm| comm.starts_with("rlock-"))
        .collect()
}

/// An event handler, so that the client has its event thread too.
struct Quiet;
impl EventHandler for Quiet {
    fn lost(&self, _lock: &LockEvent, _reason: LostReason) {}
}

#[test]
fn waiting_threads_get_closed_promptly_and_later_acquisitions_touch_nothing() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder = server.client();
    let client = server.client();
    let _held = holder.lock("s-lock").lock().expect("hold");
    let _held_fair = holder.fair_lock("s-fair").lock().expect("hold fair");
    assert!(client.semaphore("s-sem").try_set_permits(0).expect("set"));
    assert!(
        client
            .count_down_latch("s-latch")
            .try_set_count(1)
            .expect("set")
    );

    let (tx, rx) = mpsc::channel::<(&str, bool, Instant)>();
    let mut waiters = Vec::new();
    let spawn_waiter = |what: &'static str, wait: Box<dyn FnOnce() -> bool + Send>| {
        let tx = tx.clone();
        thread::spawn(move || {
            let closed = wait();
            let _ = tx.send((what, closed, Instant::now()));
        })
    };
    let (lock, fair) = (client.lock("s-lock"), client.fair_lock("s-fair"));
    let (semaphore, latch) = (
        client.semaphore("s-sem"),
        client.count_down_latch("s-latch"),
    );
    let (fair_field_tx, fair_field_rx) = mpsc::channel();
    let owner = client.clone();
    waiters.push(spawn_waiter(
        "lock()",
        Box::new(move || matches!(lock.lock(), Err(Error::Closed))),
    ));
    waiters.push(spawn_waiter(
        "fair lock()",
        Box::new(move || {
            let _ = fair_field_tx.send(owner.owner_field());
            matches!(fair.lock(), Err(Error::Closed))
        }),
    ));
    waiters.push(spawn_waiter(
        "semaphore acquire",
        Box::new(move || matches!(semaphore.acquire(1), Err(Error::Closed))),
    ));
    waiters.push(spawn_waiter(
        "latch wait",
        Box::new(move || matches!(latch.wait(), Err(Error::Closed))),
    ));
    let fair_field = fair_field_rx.recv().expect("fair field");
    assert_waiting(&client, 4, Duration::from_secs(5));
    thread::sleep(Duration::from_millis(50));

    let started = Instant::now();
    client.shutdown(Duration::from_secs(1)).expect("shutdown");
    println!(
        "shutdown with 4 waiters returned in {:?}",
        started.elapsed()
    );
    for _ in 0..4 {
        let (what, closed, at) = rx.recv_timeout(Duration::from_secs(5)).expect("woken");
        let latency = at.saturating_duration_since(started);
        println!("{what}: shutdown() -> Closed in {latency:?}");
        assert!(closed, "{what} did not return Closed");
        assert!(latency < Duration::from_millis(100), "{what}: {latency:?}");
    }
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    assert!(!queue(&server, "s-fair").contains(&fair_field));
    assert!(
        eventually(Duration::from_secs(1), || numsub(
            &server,
            &channel("s-lock")
        ) == 0),
        "a subscription is left"
    );
    let diagnostics = client.diagnostics();
    assert_eq!(
        (diagnostics.waiters, diagnostics.subscribed_channels),
        (0, 0)
    );

    // Later acquisitions: Closed at once, even with the server gone.
    let mut server = server;
    server.stop();
    let started = Instant::now();
    assert!(matches!(
        client.lock("s-lock").try_lock(),
        Err(Error::Closed)
    ));
    assert!(matches!(client.lock("s-lock").lock(), Err(Error::Closed)));
    assert!(matches!(
        client
            .fair_lock("s-fair")
            .try_lock_for(Duration::from_secs(5)),
        Err(Error::Closed)
    ));
    assert!(matches!(
        client.semaphore("s-sem").try_acquire(1),
        Err(Error::Closed)
    ));
    assert!(matches!(
        client.count_down_latch("s-latch").wait(),
        Err(Error::Closed)
    ));
    assert!(started.elapsed() < Duration::from_millis(100));
    // A second shutdown has nothing to do.
    client.shutdown(Duration::ZERO).expect("again");
}

/// Every line `MONITOR` shows on `server` within `window`, read from a
/// connection opened before `during` runs.
fn monitored(server: &RedisServer, window: Duration, during: impl FnOnce()) -> Vec<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    stream
        .write_all(&redis::cmd("MONITOR").get_packed_command())
        .expect("MONITOR");
    let mut parser = redis::Parser::new();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert!(matches!(
        parser.parse_value(&mut stream),
        Ok(redis::Value::Okay)
    ));
    during();
    let deadline = Instant::now() + window;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return lines;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match parser.parse_value(&mut stream) {
            Ok(redis::Value::SimpleString(line)) => lines.push(line),
            Ok(other) => lines.push(format!("{other:?}")),
            Err(e) if e.is_timeout() => return lines,
            Err(e) => panic!("MONITOR connection failed: {e}"),
        }
    }
}

#[test]
fn guards_are_released_by_their_threads_in_time_and_by_the_shutdown_after() {
    let _serial = serial();
    support::logs::install();
    let server = RedisServer::start();
    let rival = server.client();
    // The rival's own watchdog, once it has named itself.
    assert!(eventually(Duration::from_secs(2), || client_threads()
        .len()
        == 1));
    let before = threads();
    let mut rival_threads = client_threads();
    rival_threads.sort();
    // Renewed every 300 ms: a watchdog left running would show in MONITOR.
    let client = support::builder(server.url())
        .watchdog_timeout(Duration::from_millis(900))
        .event_handler(Quiet)
        .build()
        .expect("client");

    // Released by its thread 200 ms into the shutdown's grace.
    let (taken_tx, taken_rx) = mpsc::channel();
    let released_lock = client.lock("s-released");
    let releaser = thread::spawn(move || {
        let guard = released_lock.lock().expect("lock");
        let _ = taken_tx.send(());
        thread::sleep(Duration::from_millis(200));
        guard.unlock()
    });
    taken_rx.recv().expect("taken");

    // Never released by its thread.
    let (kept_tx, kept_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let kept_lock = client.lock("s-kept");
    let keeper = thread::spawn(move || {
        let guard = kept_lock.lock().expect("lock");
        let signal = guard.lost_signal(); // the deadline thread runs too
        let _ = kept_tx.send(());
        go_rx.recv().expect("go");
        let seen = (guard.is_lost(), guard.lost_reason(), signal.reason());
        drop(guard); // sends nothing, logs nothing
        let again = kept_lock.try_lock().map(|taken| taken.is_some());
        (seen, matches!(again, Err(Error::Closed)))
    });
    kept_rx.recv().expect("kept");
    let watchdog_renews = eventually(Duration::from_secs(2), || {
        support::threads_named("rlock-watchdog") == 2
            && support::threads_named("rlock-deadline") == 1
    });
    assert!(watchdog_renews, "threads: {:?}", client_threads());
    // A waiter, so that the subscriber thread runs too.
    let _held = rival.lock("s-waited").lock().expect("rival");
    let waited = client.lock("s-waited");
    let waiter = thread::spawn(move || matches!(waited.lock(), Err(Error::Closed)));
    assert_waiting(&client, 1, Duration::from_secs(5));
    println!("client threads before shutdown: {:?}", client_threads());

    let started = Instant::now();
    client
        .shutdown(Duration::from_millis(600))
        .expect("shutdown");
    let took = started.elapsed();
    println!("shutdown(600 ms) returned in {took:?}");
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(matches!(releaser.join().expect("releaser"), Ok(())));
    assert!(waiter.join().expect("waiter"));
    let exists: i64 = server.cmd(&["EXISTS", "s-released", "s-kept"]);
    assert_eq!(exists, 0, "a hold of the client is left in Redis");

    // From now on the client sends nothing, its kept guard's drop neither.
    let lines = monitored(&server, Duration::from_millis(1200), || {
        go_tx.send(()).expect("go");
    });
    let ((lost, reason, signalled), closed) = keeper.join().expect("keeper");
    assert!(lines.is_empty(), "the client sent: {lines:?}");
    let loud: Vec<String> = support::logs::lines()
        .into_iter()
        .filter(|line| {
            line.contains("s-kept") && (line.starts_with("WARN") || line.starts_with("ERROR"))
        })
        .collect();
    assert!(loud.is_empty(), "the kept guard's drop logged: {loud:?}");
    assert!(lost);
    assert_eq!(reason, Some(LostReason::Shutdown));
    assert_eq!(signalled, Some(LostReason::Shutdown));
    assert!(closed, "an acquisition after the shutdown was not Closed");

    let mut left = client_threads();
    left.sort();
    assert_eq!(left, rival_threads, "the client's threads are not all gone");
    let after = threads();
    println!("threads: {before} before the client, {after} after its shutdown");
    assert!(after <= before, "{after} threads after, {before} before");
    drop(client);
}

#[test]
fn a_client_shut_down_with_nothing_held_returns_at_once() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client();
    drop(client.lock("s-idle").lock().expect("lock"));
    let started = Instant::now();
    client.shutdown(Duration::from_secs(10)).expect("shutdown");
    println!("idle shutdown(10 s) returned in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(1));
    let shared = Arc::new(client);
    assert!(matches!(
        shared.lock("s-idle").try_lock(),
        Err(Error::Closed)
    ));
}

#[test]
fn a_cluster_client_shut_down_releases_its_holds_and_ends_every_thread_it_started() {
    let _serial = serial();
    let cluster = support::cluster::Cluster::shared();
    let holder = cluster.client();
    let baseline = || {
        let mut threads = client_threads();
        threads.sort();
        threads
    };
    // The holder's own threads (watchdog, refresh), once named.
    assert!(eventually(Duration::from_secs(2), || client_threads()
        .len()
        >= 2));
    let before = baseline();
    let client = cluster.client();
    let names = cluster.names_on_different_masters("s-cluster", 2);
    let _held = holder.lock(names[0].as_str()).lock().expect("hold");
    let waited = client.lock(names[0].as_str());
    let waiter = thread::spawn(move || matches!(waited.lock(), Err(Error::Closed)));
    let (kept_tx, kept_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let kept = client.lock(names[1].as_str());
    let keeper = thread::spawn(move || {
        let guard = kept.lock().expect("lock");
        let _ = kept_tx.send(());
        go_rx.recv().expect("go");
        guard.lost_reason()
    });
    kept_rx.recv().expect("kept");
    assert_waiting(&client, 1, Duration::from_secs(5));
    println!("client threads before shutdown: {:?}", client_threads());
    let started = Instant::now();
    client
        .shutdown(Duration::from_millis(100))
        .expect("shutdown");
    println!(
        "cluster shutdown(100 ms) returned in {:?}",
        started.elapsed()
    );
    assert!(waiter.join().expect("waiter"));
    let exists: i64 = cluster.owner(&names[1]).cmd(&["EXISTS", &names[1]]);
    assert_eq!(exists, 0, "the kept hold is left in Redis");
    go_tx.send(()).expect("go");
    assert_eq!(keeper.join().expect("keeper"), Some(LostReason::Shutdown));
    assert_eq!(baseline(), before, "the client's threads are not all gone");
}

#[test]
fn a_sentinel_client_shut_down_releases_its_holds_and_ends_every_thread_it_started() {
    let _serial = serial();
    let (setup, _sentinel_serial) = support::sentinel::SentinelSetup::shared();
    setup.flush();
    let sorted = || {
        let mut threads = client_threads();
        threads.sort();
        threads
    };
    let before = sorted();
    let client = support::connections(redisson_lock::Client::sentinel_builder(
        support::sentinel::MASTER_NAME,
        setup.sentinel_urls(),
    ))
    .connect_timeout(Duration::from_secs(5))
    .build()
    .expect("Sentinel client");
    let rival = client.clone();
    let kept = client.lock("s-sentinel-kept");
    let (kept_tx, kept_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let keeper = thread::spawn(move || {
        let guard = kept.lock().expect("lock");
        let _ = kept_tx.send(());
        go_rx.recv().expect("go");
        guard.lost_reason()
    });
    kept_rx.recv().expect("kept");
    // Another thread of the same client waits for the kept lock.
    let waited = rival.lock("s-sentinel-kept");
    let waiter = thread::spawn(move || matches!(waited.lock(), Err(Error::Closed)));
    assert_waiting(&client, 1, Duration::from_secs(5));
    assert_eq!(support::threads_named("rlock-sentinel"), 1);
    client
        .shutdown(Duration::from_millis(100))
        .expect("shutdown");
    assert!(waiter.join().expect("waiter"));
    let exists: i64 = support::sentinel::con(setup.master_port())
        .exists("s-sentinel-kept")
        .expect("EXISTS");
    assert_eq!(exists, 0, "the kept hold is left on the master");
    go_tx.send(()).expect("go");
    assert_eq!(keeper.join().expect("keeper"), Some(LostReason::Shutdown));
    assert_eq!(sorted(), before, "the client's threads are not all gone");
}

#[test]
fn a_hold_adopted_from_another_client_is_released_by_the_shutdown() {
    let _serial = serial();
    let server = RedisServer::start();
    let (first, second) = (server.client(), server.client());
    let token = first.lock("s-adopted").lock_owned().expect("lock").detach();
    // The adopter's guard is still alive when its client shuts down.
    let adopted = second.lock("s-adopted").adopt(&token).expect("adopt");
    second
        .shutdown(Duration::from_millis(100))
        .expect("shutdown");
    let exists: i64 = server.cmd(&["EXISTS", "s-adopted"]);
    assert_eq!(exists, 0, "the adopted hold is left in Redis");
    assert!(adopted.is_lost(), "its guard reads as lost (shutdown)");
    drop(adopted);
}
