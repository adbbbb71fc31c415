//! Property tests with hostile input: lock names (empty, 100 KB, arbitrary
//! unicode with NUL and control characters, braces anywhere, Java-style
//! `{tags}`), durations (zero, `Duration::MAX`, millisecond overflow, sub-ms),
//! URLs (arbitrary strings, valid URLs with odd ports and paths) and builder
//! settings. Every call returns `Ok` or a typed [`Error`], never panics
//! (neither the caller nor the client's own threads), and after each case the
//! server holds no key but the lock itself and its unlock latches, named by
//! Redisson's prefixName rule for that very name.
//!
//! One server per test function, `FLUSHALL` between cases.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use redisson_lock::{Client, Error, RequestId};
use support::RedisServer;

/// Panics on the client's own threads (`rlock-*`), which no caller would see.
static BACKGROUND_PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_background_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if thread::current()
                .name()
                .is_some_and(|name| name.starts_with("rlock-"))
            {
                BACKGROUND_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

fn assert_no_background_panics() {
    assert_eq!(
        BACKGROUND_PANICS.load(Ordering::SeqCst),
        0,
        "a client thread panicked"
    );
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        // Shrinking a 100 KB name takes long and the failure message already
        // carries the input.
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    }
}

/// `prefixName(prefix, name)` written out again from PROTOCOL §1.1, so that
/// the test does not trust the crate's own key derivation.
fn redisson_prefix_name(prefix: &str, name: &str) -> Vec<u8> {
    let mut key = prefix.as_bytes().to_vec();
    key.push(b':');
    if name.contains('{') {
        key.extend_from_slice(name.as_bytes());
    } else {
        key.push(b'{');
        key.extend_from_slice(name.as_bytes());
        key.push(b'}');
    }
    key
}

/// Every key on the server is `name` or `<latch prefix>:<32 hex digits>`.
fn only_own_keys(server: &RedisServer, name: &str) -> Result<(), TestCaseError> {
    let keys: Vec<Vec<u8>> = server.cmd(&["KEYS", "*"]);
    let mut latch = redisson_prefix_name("redisson_unlock_latch", name);
    latch.push(b':');
    for key in &keys {
        let is_latch = key.len() == latch.len() + 32
            && key.starts_with(&latch)
            && key[latch.len()..]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
        prop_assert!(
            key.as_slice() == name.as_bytes() || is_latch,
            "foreign key {:?} (lock name {:?})",
            String::from_utf8_lossy(&key[..key.len().min(200)]),
            &name[..name.len().min(200)]
        );
    }
    Ok(())
}

fn flushall(server: &RedisServer) {
    let _: () = server.cmd(&["FLUSHALL"]);
}

/// Names a careless implementation would trip over.
fn hostile_name() -> impl Strategy<Value = String> {
    let huge = any::<String>().prop_map(|unit| {
        let unit = if unit.is_empty() {
            "{".to_owned()
        } else {
            unit
        };
        unit.repeat(100 * 1024 / unit.len() + 1)
    });
    prop_oneof![
        1 => Just(String::new()),
        1 => huge,
        4 => any::<String>(),
        // Braces, colons, NUL, control characters and spaces in any position.
        4 => "[{}:\\x00-\\x1f \\x7f*?\\[\\]\\\\]{1,16}",
        // Java-style names with hash tags, well formed or not.
        3 => "[a-zA-Z0-9._-]{0,6}(\\{[a-zA-Z0-9:]{0,6}\\}?)?[a-zA-Z0-9:{}]{0,6}",
        // Names that look like the derived keys themselves.
        1 => "(redisson_lock__channel|redisson_unlock_latch):\\{?[a-z]{0,4}\\}?(:[0-9a-f]{32})?",
    ]
}

fn is_invalid<T>(result: &redisson_lock::Result<T>) -> bool {
    matches!(result, Err(Error::InvalidArgument(_)))
}

#[test]
fn any_lock_name_works_or_is_refused_and_touches_only_its_own_keys() {
    count_background_panics();
    let server = RedisServer::start();
    let client = server.watchdog_client(Duration::from_secs(2));
    let rival = server.watchdog_client(Duration::from_secs(2));
    let started = Instant::now();
    proptest!(config(96), |(name in hostile_name())| {
        flushall(&server);
        let lock = client.lock(name.clone());
        prop_assert_eq!(lock.name(), name.as_str());
        if name.is_empty() {
            prop_assert!(is_invalid(&lock.lock()));
            prop_assert!(is_invalid(&lock.try_lock()));
            prop_assert!(is_invalid(&lock.try_lock_for(Duration::from_millis(5))));
            prop_assert!(is_invalid(&lock.force_unlock()));
            prop_assert!(is_invalid(&lock.is_locked()));
            prop_assert!(is_invalid(&lock.hold_count()));
            prop_assert!(is_invalid(&lock.remaining_ttl()));
            prop_assert!(is_invalid(&lock.unlock_with_request_id(&RequestId::new())));
            let keys: Vec<Vec<u8>> = server.cmd(&["KEYS", "*"]);
            prop_assert!(keys.is_empty());
            return Ok(());
        }

        // Every name that is not empty is a lock like any other.
        let guard = lock.lock().expect("lock");
        prop_assert!(lock.is_locked().expect("is_locked"));
        prop_assert!(lock.is_held_by_current_thread().expect("held"));
        prop_assert_eq!(lock.hold_count().expect("hold_count"), 1);
        prop_assert!(lock.remaining_ttl().expect("ttl").is_some());
        let again = lock.try_lock().expect("try_lock");
        prop_assert!(again.is_some(), "reentry");
        drop(again);
        prop_assert_eq!(lock.hold_count().expect("hold_count"), 1);

        // Another client waits on the name's channel and is woken by the
        // release, long before the 2 s lease would let it in.
        let rival_lock = rival.lock(name.clone());
        prop_assert!(rival_lock.try_lock().expect("rival try_lock").is_none());
        let waiter = {
            let rival_lock = rival_lock.clone();
            thread::spawn(move || {
                let start = Instant::now();
                rival_lock
                    .try_lock_for(Duration::from_secs(10))
                    .map(|guard| guard.map(|guard| (guard.unlock(), start.elapsed())))
            })
        };
        let subscribed = support::eventually(Duration::from_secs(2), || {
            rival.diagnostics().waiters == 1
        });
        prop_assert!(subscribed, "the waiter should have subscribed");
        guard.unlock().expect("unlock");
        let (unlocked, waited) = waiter
            .join()
            .expect("waiter thread")
            .expect("try_lock_for")
            .expect("woken and acquired");
        prop_assert!(unlocked.is_ok(), "rival unlock: {:?}", unlocked);
        prop_assert!(waited < Duration::from_millis(1500), "woken after {:?}", waited);

        // Force-unlock across clients, and unlocks of what is not held.
        let rival_guard = rival_lock.try_lock().expect("rival try_lock").expect("free");
        prop_assert!(lock.force_unlock().expect("force_unlock"));
        prop_assert!(!lock.force_unlock().expect("force_unlock again"));
        let refused = rival_guard.unlock();
        prop_assert!(
            matches!(refused, Err(Error::NotHeld { .. } | Error::Lost { .. })),
            "{:?}", refused
        );
        let not_held = lock.unlock_with_request_id(&RequestId::new());
        prop_assert!(matches!(not_held, Err(Error::NotHeld { .. })), "{:?}", not_held);
        prop_assert!(!lock.is_locked().expect("is_locked"));
        only_own_keys(&server, &name)?;
    });
    assert_no_background_panics();
    eprintln!("96 names in {:?}", started.elapsed());
}

/// Durations at and beyond every edge.
fn hostile_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::from_nanos(1)),
        Just(Duration::from_millis(u64::MAX)),
        Just(Duration::from_secs(u64::MAX / 1000 + 1)),
        Just(Duration::from_secs(100 * 365 * 24 * 3600)),
        Just(Duration::from_secs(100 * 365 * 24 * 3600) + Duration::from_nanos(1)),
        (0u64..1_000_000).prop_map(Duration::from_nanos),
        (1u64..100_000).prop_map(Duration::from_millis),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// The crate's documented lease range: whole milliseconds up to 100 years.
fn valid_lease(lease: Duration) -> bool {
    lease >= Duration::from_millis(1) && lease <= Duration::from_secs(100 * 365 * 24 * 3600)
}

#[test]
fn any_duration_is_a_valid_lease_or_an_invalid_argument_and_waits_stay_bounded() {
    count_background_panics();
    let (server, client) = RedisServer::start_with_client();
    let rival = Client::open(server.url()).expect("rival");
    proptest!(config(128), |(lease in hostile_duration(), wait in hostile_duration())| {
        flushall(&server);
        let lock = client.lock("durations").with_lease(lease);
        for attempt in [
            lock.try_lock(),
            lock.try_lock_for(wait),
            lock.lock().map(Some),
        ] {
            if valid_lease(lease) {
                let guard = attempt.expect("a valid lease").expect("a free lock");
                let ttl = lock.remaining_ttl().expect("ttl").expect("a TTL");
                prop_assert!(ttl <= lease, "ttl {:?} > lease {:?}", ttl, lease);
                guard.unlock().expect("unlock");
            } else {
                prop_assert!(is_invalid(&attempt), "lease {:?}: {:?}", lease, attempt.map(|g| g.is_some()));
            }
        }
        if let Some(deadline) = Instant::now().checked_add(wait) {
            let attempt = lock.try_lock_until(deadline);
            prop_assert!(attempt.is_ok() == valid_lease(lease));
        }
        // Waits on a held lock: past deadlines and sub-ms budgets return at once.
        let held = rival.lock("durations").lock().expect("rival lock");
        let short = wait.min(Duration::from_millis(2));
        let start = Instant::now();
        let attempt = client.lock("durations").try_lock_for(short);
        prop_assert!(matches!(attempt, Ok(None)), "{:?}", attempt.map(|g| g.is_some()));
        let past = Instant::now().checked_sub(wait).unwrap_or_else(Instant::now);
        prop_assert!(matches!(client.lock("durations").try_lock_until(past), Ok(None)));
        prop_assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
        held.unlock().expect("rival unlock");
        only_own_keys(&server, "durations")?;
    });
    assert_no_background_panics();
}

#[derive(Debug, Clone)]
struct Settings {
    watchdog: Duration,
    connect: Duration,
    response: Duration,
    subscription: Duration,
    pool: u32,
    retries: u32,
    retry_delay: Duration,
}

/// 0, 1, `limit`, one past it, `u32::MAX`, or one of `usual`, equally likely.
fn counts_around(limit: u32, usual: std::ops::Range<u32>) -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(limit),
        Just(limit + 1),
        Just(u32::MAX),
        usual
    ]
}

fn hostile_settings() -> impl Strategy<Value = Settings> {
    // A valid connect timeout is kept short: it bounds how long `build` may
    // keep trying when the other settings make every connection fail.
    let connect = prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::from_secs(24 * 3600) + Duration::from_nanos(1)),
        (1u64..1_000_000).prop_map(Duration::from_nanos),
        (1u64..500).prop_map(Duration::from_millis),
    ];
    let retry_delay = prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::from_secs(3600) + Duration::from_nanos(1)),
        (0u64..1_000_000).prop_map(Duration::from_nanos),
        (0u64..5).prop_map(Duration::from_millis),
    ];
    let count = counts_around(100, 0..20);
    let pool = counts_around(10_000, 1..64);
    // Mostly usable values, so that about one case in five builds a client.
    let timeout = |usable: std::ops::Range<u64>| prop_oneof![4 => usable.prop_map(Duration::from_nanos), 1 => hostile_duration()];
    (
        timeout(30_000_000..5_000_000_000),
        prop_oneof![4 => (1u64..500).prop_map(Duration::from_millis), 1 => connect],
        timeout(1..2_000_000_000),
        timeout(1..2_000_000_000),
        prop_oneof![4 => 1u32..64, 1 => pool],
        prop_oneof![4 => 0u32..5, 1 => count],
        prop_oneof![4 => (0u64..5).prop_map(Duration::from_millis), 1 => retry_delay],
    )
        .prop_map(
            |(watchdog, connect, response, subscription, pool, retries, retry_delay)| Settings {
                watchdog,
                connect,
                response,
                subscription,
                pool,
                retries,
                retry_delay,
            },
        )
}

#[test]
fn any_builder_settings_build_a_working_client_or_give_a_typed_error() {
    count_background_panics();
    let server = RedisServer::start();
    let url = server.url();
    let built = Mutex::new(0u32);
    proptest!(config(64), |(settings in hostile_settings())| {
        flushall(&server);
        let result = Client::builder(url.as_str())
            .watchdog_timeout(settings.watchdog)
            .connect_timeout(settings.connect)
            .response_timeout(settings.response)
            .subscription_timeout(settings.subscription)
            .pool_size(settings.pool)
            .unlock_retries(settings.retries, settings.retry_delay)
            .build();
        let client = match result {
            Ok(client) => client,
            // Refused settings, or settings that make connecting fail (a 1 ns
            // timeout): either way a typed error, not a panic or a hang.
            Err(Error::InvalidArgument(_) | Error::Unavailable { .. } | Error::Redis(_)) => {
                return Ok(());
            }
            Err(other) => {
                prop_assert!(false, "unexpected error kind {:?} for {:?}", other, settings);
                unreachable!()
            }
        };
        *built.lock().expect("count") += 1;
        prop_assert!(client.watchdog_timeout() == settings.watchdog);
        let lock = client.lock("settings");
        // A tiny response timeout may make any of these fail, but only with
        // a typed error; whatever happens, nothing foreign is written.
        match lock.try_lock() {
            Ok(Some(guard)) => {
                let _ = lock.hold_count();
                let _ = guard.unlock();
            }
            Ok(None) => {}
            Err(e) => prop_assert!(!matches!(e, Error::UnexpectedReply(_)), "{:?}", e),
        }
        drop(lock);
        drop(client);
        only_own_keys(&server, "settings")?;
    });
    let built = *built.lock().expect("count");
    assert!(built > 0, "no settings were accepted at all");
    assert_no_background_panics();
}

/// Strings redis-rs might be asked to parse as a server address.
fn hostile_url(port: u16) -> impl Strategy<Value = String> {
    let weird_port = prop_oneof![
        Just("0".to_owned()),
        Just("65535".to_owned()),
        Just("65536".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just("-1".to_owned()),
        Just(String::new()),
        Just(port.to_string()),
        (1u16..=u16::MAX).prop_map(|p| p.to_string()),
    ];
    let weird_path = prop_oneof![
        Just(String::new()),
        Just("/".to_owned()),
        Just("/0".to_owned()),
        Just("/15".to_owned()),
        Just("/16".to_owned()),
        Just("/-1".to_owned()),
        Just("/99999999999999999999".to_owned()),
        Just("/%00".to_owned()),
        Just("/a/b/c?x=y#z".to_owned()),
        Just("/?protocol=resp3".to_owned()),
        Just("/?protocol=banana".to_owned()),
        "/[a-z0-9%{}?=&#]{0,12}",
    ];
    let userinfo = prop_oneof![
        Just(String::new()),
        Just("user@".to_owned()),
        Just(":pw@".to_owned()),
        Just("default:wrong@".to_owned()),
        Just("%ff%00:%zz@".to_owned()),
    ];
    let scheme = prop_oneof![
        Just("redis"),
        Just("rediss"),
        Just("redis+unix"),
        Just("unix"),
        Just("valkey"),
        Just("http"),
    ];
    // URLs of the test server itself, with odd but usable paths and options.
    let reachable = prop_oneof![
        Just(""),
        Just("/"),
        Just("/0"),
        Just("/15"),
        Just("/?protocol=resp3"),
        Just("/0?protocol=resp2"),
        Just("/#fragment"),
    ]
    .prop_map(move |path| format!("redis://127.0.0.1:{port}{path}"));
    prop_oneof![
        2 => reachable,
        3 => any::<String>(),
        1 => "[ -~]{0,40}",
        6 => (scheme, userinfo, weird_port, weird_path).prop_map(|(scheme, user, port, path)| {
            if scheme.contains("unix") {
                format!("{scheme}://{user}/nonexistent/redis-{port}.sock{path}")
            } else {
                format!("{scheme}://{user}127.0.0.1:{port}{path}")
            }
        }),
    ]
}

#[test]
fn any_url_connects_or_gives_a_typed_error() {
    count_background_panics();
    let server = RedisServer::start();
    let port = server.port();
    let connected = AtomicUsize::new(0);
    proptest!(config(128), |(url in hostile_url(port))| {
        flushall(&server);
        let start = Instant::now();
        let result = Client::builder(url.as_str())
            .connect_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(300))
            .build();
        prop_assert!(start.elapsed() < Duration::from_secs(5), "{:?} took {:?}", url, start.elapsed());
        match result {
            Ok(client) => {
                // Only an address of the test server can have worked.
                prop_assert!(url.contains(&port.to_string()), "{:?} connected", url);
                connected.fetch_add(1, Ordering::SeqCst);
                let lock = client.lock("url");
                if let Ok(Some(guard)) = lock.try_lock() {
                    prop_assert!(guard.unlock().is_ok());
                }
            }
            Err(e) => prop_assert!(
                matches!(e, Error::InvalidArgument(_) | Error::Unavailable { .. } | Error::Redis(_)),
                "{:?}: {:?}", url, e
            ),
        }
        only_own_keys(&server, "url")?;
    });
    assert!(
        connected.load(Ordering::SeqCst) > 0,
        "no URL reached the test server: the strategy lost its valid URLs"
    );
    assert_no_background_panics();
}
