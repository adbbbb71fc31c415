//! Bad input and unusable servers give a typed error, never a panic or a hang.

mod support;

use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, ClientBuilder, Error, RequestId};
use support::RedisServer;

fn is_invalid<T: std::fmt::Debug>(result: redisson_lock::Result<T>) -> bool {
    matches!(result, Err(Error::InvalidArgument(_)))
}

/// Runs `f` on its own thread and fails the test if it takes longer than
/// `limit`, instead of hanging the suite.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("no answer within {limit:?}"))
}

#[test]
fn every_operation_on_an_empty_lock_name_is_an_invalid_argument() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("");
    assert_eq!(lock.name(), "");
    assert!(is_invalid(lock.lock()));
    assert!(is_invalid(lock.try_lock()));
    assert!(is_invalid(lock.try_lock_for(Duration::from_secs(1))));
    assert!(is_invalid(lock.try_lock_until(Instant::now())));
    assert!(is_invalid(lock.force_unlock()));
    assert!(is_invalid(lock.is_locked()));
    assert!(is_invalid(lock.is_held_by_current_thread()));
    assert!(is_invalid(lock.hold_count()));
    assert!(is_invalid(lock.remaining_ttl()));
    assert!(is_invalid(lock.unlock_with_request_id(&RequestId::new())));
    assert!(is_invalid(
        lock.with_lease(Duration::from_secs(1)).try_lock()
    ));
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(keys.is_empty(), "nothing was written: {keys:?}");
    assert_eq!(server.command_calls("evalsha"), 0, "no script was sent");
}

#[test]
fn unusable_leases_are_invalid_arguments_and_write_nothing() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.lock("leases");
    for lease in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
        Duration::MAX,
        Duration::from_secs(u64::MAX / 1000),
    ] {
        let leased = lock.with_lease(lease);
        assert!(is_invalid(leased.lock()), "lock with lease {lease:?}");
        assert!(
            is_invalid(leased.try_lock()),
            "try_lock with lease {lease:?}"
        );
        assert!(
            is_invalid(leased.try_lock_for(Duration::from_millis(10))),
            "try_lock_for with lease {lease:?}"
        );
    }
    assert!(!lock.is_locked().expect("is_locked"));
    // The smallest lease that is a whole millisecond works.
    let guard = lock
        .with_lease(Duration::from_millis(1))
        .try_lock()
        .expect("try_lock")
        .expect("free");
    let _ = guard.unlock();
}

#[test]
fn unusable_watchdog_timeouts_are_invalid_arguments() {
    let server = RedisServer::start();
    for timeout in [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_micros(500),
        Duration::MAX,
    ] {
        let built = Client::builder(server.url())
            .watchdog_timeout(timeout)
            .build();
        assert!(is_invalid(built), "watchdog timeout {timeout:?}");
    }
}

#[test]
fn unusable_pool_sizes_and_timeouts_are_invalid_arguments() {
    let server = RedisServer::start();
    type Setting = fn(ClientBuilder) -> ClientBuilder;
    let unusable: [(&str, Setting); 5] = [
        ("a pool of 0", |b| b.pool_size(0)),
        ("a zero connect timeout", |b| {
            b.connect_timeout(Duration::ZERO)
        }),
        ("an endless response timeout", |b| {
            b.response_timeout(Duration::MAX)
        }),
        ("a zero subscription timeout", |b| {
            b.subscription_timeout(Duration::ZERO)
        }),
        ("u32::MAX unlock retries", |b| {
            b.unlock_retries(u32::MAX, Duration::from_millis(1))
        }),
    ];
    for (what, setting) in unusable {
        let built = setting(Client::builder(server.url())).build();
        assert!(is_invalid(built), "{what}");
    }
}

#[test]
fn unparsable_urls_are_invalid_arguments() {
    for url in ["not a url", "redis://[::1", "http://127.0.0.1:1/", ""] {
        let result = Client::open(url);
        // The message shows what a URL looks like, not only that it did
        // not parse.
        match result {
            Err(Error::InvalidArgument(message)) => assert!(
                message.contains("expected redis://[[user]:password@]host[:port][/db]"),
                "{url:?}: {message}"
            ),
            other => panic!("{url:?}: {other:?}"),
        }
    }
}

#[test]
fn unreachable_server_fails_build_with_unavailable_within_the_connect_timeout() {
    // A port that was free a moment ago and that nobody listens on.
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let (elapsed, result) = within(Duration::from_secs(10), move || {
        let start = Instant::now();
        let result = Client::builder(url)
            .connect_timeout(Duration::from_millis(500))
            .build();
        (start.elapsed(), result.map(|_| ()))
    });
    assert!(
        matches!(result, Err(Error::Unavailable { .. })),
        "{result:?}"
    );
    assert!(result.as_ref().expect_err("failed").is_transient());
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[test]
fn server_that_goes_away_fails_lock_calls_with_a_transient_error_in_time() {
    let mut server = RedisServer::start();
    let client = Client::builder(server.url())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .build()
        .expect("client");
    server.stop();
    let lock = client.lock("gone");
    let (elapsed, result) = within(Duration::from_secs(10), move || {
        let start = Instant::now();
        let result = lock.try_lock().map(|guard| guard.is_some());
        (start.elapsed(), result)
    });
    let err = result.expect_err("no server");
    assert!(err.is_transient(), "{err:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[test]
fn try_lock_for_the_longest_duration_takes_a_free_lock() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.lock("forever-wait");
    let guard = lock
        .try_lock_for(Duration::MAX)
        .expect("try_lock_for")
        .expect("free");
    assert_eq!(lock.hold_count().expect("count"), 1);
    guard.unlock().expect("unlock");
}

#[test]
fn try_lock_until_a_past_instant_makes_exactly_one_attempt() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["HSET", "past", "someone-else:1", "1"]);
    let _: () = server.cmd(&["PEXPIRE", "past", "30000"]);
    let client = server.client();
    // Load the acquire script first so NOSCRIPT does not count as an attempt.
    drop(client.lock("warm-up").try_lock().expect("warm-up"));
    let past = Instant::now();
    thread::sleep(Duration::from_millis(5));

    let before = server.command_calls("evalsha");
    let (got, elapsed) = support::timed(|| client.lock("past").try_lock_until(past));
    let got = got.expect("try_lock_until");
    let attempts = server.command_calls("evalsha") - before;
    assert!(got.is_none());
    assert_eq!(attempts, 1, "exactly one acquire attempt");
    assert!(elapsed < Duration::from_millis(500), "took {elapsed:?}");
    assert_eq!(client.diagnostics().subscribed_channels, 0);
    assert_eq!(server.client_count("pubsub"), 0, "it never subscribed");

    // On a free lock, the one attempt succeeds.
    let guard = client
        .lock("free")
        .try_lock_until(past)
        .expect("try_lock_until")
        .expect("free lock");
    guard.unlock().expect("unlock");
}

#[test]
fn a_lock_key_that_is_not_a_hash_is_a_wrongtype_error() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "stringly", "x"]);
    let client = server.client();
    let lock = client.lock("stringly");
    for result in [
        lock.lock().map(|_| ()),
        lock.try_lock().map(|_| ()),
        lock.try_lock_for(Duration::from_millis(50)).map(|_| ()),
    ] {
        match result {
            Err(Error::Redis(e)) => {
                assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
            }
            other => panic!("expected WRONGTYPE, got {other:?}"),
        }
    }
    assert!(matches!(lock.hold_count(), Err(Error::Redis(_))));
    let value: String = server.cmd(&["GET", "stringly"]);
    assert_eq!(value, "x", "the key is untouched");
}
