//! An acquire whose reply never arrives (response timeout while Redis is
//! frozen, connection killed after the server ran it, a retried command) may
//! still have taken the lock under this thread's field. Found by the torture
//! run (examples/torture/): the thread's next acquire of that lock counted as
//! a *reentry* (count 2), its unlock left count 1 behind, nothing renewed it,
//! and a thread cycling over a few locks re-entered its own phantom holds
//! before they expired, so every other process starved for the whole run.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use support::RedisServer;
use support::state::hgetall;

#[test]
fn stale_count_under_own_field_does_not_turn_a_fresh_acquire_into_a_reentry() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("phantom");
    // What a lost acquire reply leaves behind: our field, count 1, a lease.
    let field = client.owner_field();
    let _: () = server.cmd(&["HSET", "phantom", &field, "1"]);
    let _: () = server.cmd(&["PEXPIRE", "phantom", "30000"]);

    let guard = lock.lock().expect("lock");
    assert_eq!(
        hgetall(&server, "phantom"),
        HashMap::from([(field.clone(), "1".into())])
    );
    assert_eq!(lock.hold_count().expect("count"), 1);
    // A genuine reentry still counts.
    let inner = lock.lock().expect("reentry");
    assert_eq!(lock.hold_count().expect("count"), 2);
    drop(inner);
    guard.unlock().expect("unlock");
    assert!(
        !lock.is_locked().expect("is_locked"),
        "the last unlock must free the lock: {:?}",
        hgetall(&server, "phantom")
    );
}

#[test]
fn acquire_timed_out_while_redis_was_frozen_does_not_keep_the_lock_after_the_next_unlock() {
    let server = RedisServer::start();
    let client = support::builder(server.url())
        .response_timeout(Duration::from_millis(200))
        .build()
        .expect("client");
    let other = support::builder(server.url())
        .build()
        .expect("other client");
    let lock = client.lock("frozen");
    // Warm a pooled connection and the server's script cache, so that the
    // frozen EVALSHA is the acquire itself (not a NOSCRIPT round).
    lock.try_lock()
        .expect("warm up")
        .expect("free")
        .unlock()
        .expect("unlock");

    server.pause();
    let attempt = lock.try_lock();
    std::thread::sleep(Duration::from_millis(300));
    server.resume();
    let err = match attempt {
        Err(e) => e,
        Ok(g) => panic!("a frozen server cannot answer: {g:?}"),
    };
    assert!(err.is_transient(), "{err}");
    // The server ran the acquire once it thawed: we hold it without knowing.
    let field = client.owner_field();
    assert!(
        support::eventually(Duration::from_secs(5), || hgetall(&server, "frozen")
            .contains_key(&field)),
        "the frozen acquire should have run after the thaw"
    );

    let guard = lock.try_lock().expect("try_lock").expect("our own field");
    guard.unlock().expect("unlock");
    assert!(
        !lock.is_locked().expect("is_locked"),
        "a phantom count survived the unlock: {:?}",
        hgetall(&server, "frozen")
    );
    assert!(
        other.lock("frozen").try_lock().expect("try_lock").is_some(),
        "another client must get the lock at once"
    );
}
