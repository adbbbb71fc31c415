//! Cancellable waits (`with_cancel`, issue 33 item 1): a cancelled wait
//! returns `Error::Cancelled` within 100 ms of `cancel()`, holds nothing,
//! leaves no subscription behind, and a fair waiter leaves the queue; a
//! token cancelled before the call fails it without touching the server.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{CancelToken, Client, Error};
use support::state::{channel, numsub, queue};
use support::{RedisServer, assert_waiting, eventually};

/// The bound on cancel() → return.
const PROMPT: Duration = Duration::from_millis(100);

/// Runs `wait` on a thread of its own, lets it park (its client shows one
/// waiter, then 50 ms more), cancels `token`, and returns what the wait
/// returned and how long after `cancel()` it did.
fn cancel_while_waiting<T: Send + 'static>(
    client: &Client,
    token: &CancelToken,
    what: &str,
    wait: impl FnOnce() -> redisson_lock::Result<T> + Send + 'static,
) -> (redisson_lock::Result<T>, Duration) {
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let result = wait();
        let _ = tx.send(Instant::now());
        result
    });
    assert_waiting(client, 1, Duration::from_secs(5));
    thread::sleep(Duration::from_millis(50));
    let cancelled_at = Instant::now();
    token.cancel();
    let returned_at = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the cancelled wait returned");
    let result = waiter.join().expect("the waiting thread");
    let latency = returned_at.saturating_duration_since(cancelled_at);
    println!("{what}: cancel() -> return in {latency:?}");
    (result, latency)
}

/// The client subscribes to nothing any more, and neither does the server
/// count a subscriber of `channel`.
fn no_subscription_left(server: &RedisServer, client: &Client, channel: &str) {
    assert!(
        eventually(Duration::from_secs(1), || {
            let diagnostics = client.diagnostics();
            diagnostics.waiters == 0
                && diagnostics.subscribed_channels == 0
                && numsub(server, channel) == 0
        }),
        "left behind: {:?}, {} subscriber(s) of {channel}",
        client.diagnostics(),
        numsub(server, channel)
    );
    let channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", "*"]);
    assert!(!channels.contains(&channel.to_owned()), "{channels:?}");
}

fn assert_cancelled<T>(result: &redisson_lock::Result<T>, latency: Duration) {
    assert!(matches!(result, Err(Error::Cancelled)), "not cancelled");
    assert!(latency < PROMPT, "returned {latency:?} after cancel()");
}

#[test]
fn a_cancelled_lock_returns_promptly_holding_nothing_and_unsubscribed() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let held = holder.lock("cancel-lock").lock().expect("hold");
    let token = CancelToken::new();
    let lock = waiter.lock("cancel-lock").with_cancel(&token);
    let (result, latency) = cancel_while_waiting(&waiter, &token, "lock()", move || {
        lock.lock().map(|guard| guard.is_lost())
    });
    assert_cancelled(&result, latency);
    no_subscription_left(&server, &waiter, &channel("cancel-lock"));
    assert!(!held.is_lost() && holder.lock("cancel-lock").is_locked().expect("is_locked"));
    assert_eq!(waiter.diagnostics().registered_holds, 0);
    // The token stays cancelled: the next wait fails at once.
    let again = waiter.lock("cancel-lock").with_cancel(&token);
    assert!(matches!(again.lock(), Err(Error::Cancelled)));
    drop(held);
    // A handle without the token takes it as usual.
    assert!(
        waiter
            .lock("cancel-lock")
            .try_lock()
            .expect("try")
            .is_some()
    );
}

#[test]
fn a_cancelled_try_lock_for_returns_promptly() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let _held = holder.lock("cancel-try").lock().expect("hold");
    let token = CancelToken::new();
    let lock = waiter.lock("cancel-try").with_cancel(&token);
    let (result, latency) = cancel_while_waiting(&waiter, &token, "try_lock_for", move || {
        lock.try_lock_for(Duration::from_secs(20))
            .map(|guard| guard.is_some())
    });
    assert_cancelled(&result, latency);
    no_subscription_left(&server, &waiter, &channel("cancel-try"));
}

#[test]
fn a_cancelled_fair_waiter_leaves_the_queue() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let _held = holder.fair_lock("cancel-fair").lock().expect("hold");
    let token = CancelToken::new();
    let lock = waiter.fair_lock("cancel-fair").with_cancel(&token);
    let (field_tx, field_rx) = mpsc::channel();
    let owner = waiter.clone();
    let (result, latency) = cancel_while_waiting(&waiter, &token, "fair lock()", move || {
        let _ = field_tx.send(owner.owner_field());
        lock.lock().map(|guard| guard.is_lost())
    });
    let field = field_rx.recv().expect("the waiter's field");
    assert_cancelled(&result, latency);
    assert!(
        eventually(Duration::from_secs(1), || !queue(&server, "cancel-fair")
            .contains(&field)),
        "{field} still queued: {:?}",
        queue(&server, "cancel-fair")
    );
    let deadlines: Option<f64> =
        server.cmd(&["ZSCORE", "redisson_lock_timeout:{cancel-fair}", &field]);
    assert_eq!(deadlines, None);
    no_subscription_left(
        &server,
        &waiter,
        &format!("redisson_lock__channel:{{cancel-fair}}:{field}"),
    );
}

#[test]
fn a_cancelled_spin_lock_wait_returns_promptly() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let _held = holder.spin_lock("cancel-spin").lock().expect("hold");
    let token = CancelToken::new();
    // A backoff of a second: a wait that sleeps it out is late.
    let lock = waiter
        .spin_lock("cancel-spin")
        .with_backoff(Duration::from_secs(1), Duration::from_secs(1))
        .with_cancel(&token);
    let (tx, rx) = mpsc::channel();
    let spinning = thread::spawn(move || {
        let result = lock.lock().map(|guard| guard.is_lost());
        let _ = tx.send(Instant::now());
        result
    });
    thread::sleep(Duration::from_millis(300));
    let cancelled_at = Instant::now();
    token.cancel();
    let returned_at = rx.recv_timeout(Duration::from_secs(5)).expect("returned");
    let latency = returned_at.saturating_duration_since(cancelled_at);
    println!("spin lock(): cancel() -> return in {latency:?}");
    assert_cancelled(&spinning.join().expect("thread"), latency);
}

#[test]
fn a_cancelled_semaphore_acquire_returns_promptly_holding_no_permit() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.semaphore("cancel-sem");
    assert!(semaphore.try_set_permits(0).expect("set"));
    let token = CancelToken::new();
    let waiting = semaphore.with_cancel(&token);
    let (result, latency) = cancel_while_waiting(&client, &token, "semaphore acquire", move || {
        waiting.acquire(1).map(|permits| permits.count())
    });
    assert_cancelled(&result, latency);
    assert_eq!(semaphore.available_permits().expect("permits"), 0);
    no_subscription_left(&server, &client, "redisson_sc:{cancel-sem}");

    let expirable = client.permit_expirable_semaphore("cancel-pes");
    assert!(expirable.try_set_permits(0).expect("set"));
    let token = CancelToken::new();
    let waiting = expirable.with_cancel(&token);
    let (result, latency) = cancel_while_waiting(&client, &token, "expirable acquire", move || {
        waiting.acquire(None).map(|permits| permits.ids().len())
    });
    assert_cancelled(&result, latency);
    assert_eq!(expirable.acquired_permits().expect("acquired"), 0);
    no_subscription_left(&server, &client, "redisson_sc:{cancel-pes}");
}

#[test]
fn a_cancelled_latch_wait_returns_promptly() {
    let server = RedisServer::start();
    let client = server.client();
    let latch = client.count_down_latch("cancel-latch");
    assert!(latch.try_set_count(1).expect("set"));
    let token = CancelToken::new();
    let waiting = latch.with_cancel(&token);
    let (result, latency) =
        cancel_while_waiting(&client, &token, "latch wait", move || waiting.wait());
    assert_cancelled(&result, latency);
    no_subscription_left(
        &server,
        &client,
        "redisson_countdownlatch__channel__{cancel-latch}",
    );
    assert_eq!(latch.count().expect("count"), 1);
}

#[test]
fn a_token_cancelled_before_the_call_fails_it_without_touching_the_server() {
    let mut server = RedisServer::start();
    let client = server.client();
    let token = CancelToken::new();
    token.cancel();
    assert!(token.is_cancelled());
    let (lock, semaphore, latch) = (
        client.lock("early").with_cancel(&token),
        client.semaphore("early-sem").with_cancel(&token),
        client.count_down_latch("early-latch").with_cancel(&token),
    );
    // A call that sent anything would fail with a connection error.
    server.stop();
    let started = Instant::now();
    assert!(matches!(lock.lock(), Err(Error::Cancelled)));
    assert!(matches!(
        lock.try_lock_for(Duration::from_secs(5)),
        Err(Error::Cancelled)
    ));
    assert!(matches!(semaphore.acquire(1), Err(Error::Cancelled)));
    assert!(matches!(latch.wait(), Err(Error::Cancelled)));
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
}

#[test]
fn a_cancel_racing_a_release_leaves_the_waiter_holding_nothing_or_a_guard() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    for round in 0..20 {
        let name = format!("race-{round}");
        let held = holder.lock(name.as_str()).lock().expect("hold");
        let token = CancelToken::new();
        let lock = waiter.lock(name.as_str()).with_cancel(&token);
        let waiting = thread::spawn(move || match lock.lock() {
            // The wait won: the guard is released where it was taken.
            Ok(guard) => guard.unlock().map(|()| true),
            Err(e) => Err(e),
        });
        assert_waiting(&waiter, 1, Duration::from_secs(5));
        let canceller = thread::spawn(move || token.cancel());
        drop(held);
        canceller.join().expect("canceller");
        match waiting.join().expect("waiter") {
            Ok(true) | Err(Error::Cancelled) => {}
            other => panic!("round {round}: {:?}", other.map_err(|e| e.to_string())),
        }
        // Either way nothing of the waiter's is left in Redis.
        let hash: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", &name]);
        assert!(hash.is_empty(), "round {round}: {hash:?}");
    }
}

#[test]
fn a_cancelled_write_lock_wait_and_a_cancelled_owned_wait_return_promptly() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let _read = holder
        .read_write_lock("cancel-rw")
        .read_lock()
        .lock()
        .expect("read hold");
    let token = CancelToken::new();
    let write = waiter
        .read_write_lock("cancel-rw")
        .write_lock()
        .with_cancel(&token);
    let (result, latency) = cancel_while_waiting(&waiter, &token, "write lock()", move || {
        write.lock().map(|guard| guard.is_lost())
    });
    assert_cancelled(&result, latency);
    no_subscription_left(&server, &waiter, "redisson_rwlock:{cancel-rw}");

    let _held = holder.lock("cancel-owned").lock().expect("hold");
    let token = CancelToken::new();
    let owned = waiter.lock("cancel-owned").with_cancel(&token);
    let (result, latency) = cancel_while_waiting(&waiter, &token, "lock_owned()", move || {
        owned.lock_owned().map(|guard| guard.is_lost())
    });
    assert_cancelled(&result, latency);
    no_subscription_left(&server, &waiter, &channel("cancel-owned"));
}
