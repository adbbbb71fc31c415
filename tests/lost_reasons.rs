//! Every lost hold says why, in `Error::Lost` and in the log; signals that
//! a hold was lost survive a lost reply; errors are typed.

mod support;

use std::time::Duration;

use redisson_lock::{Client, Error, LostReason};
use support::proxy::{Fault, Proxy};
use support::state::exists;
use support::{RedisServer, eventually, logs};

#[test]
fn unlock_of_a_key_overwritten_by_another_type_is_lost_not_a_raw_wrongtype() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("overwritten");
    let guard = lock
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("lock");
    let _: () = server.cmd(&["SET", "overwritten", "not a lock"]);
    match guard.unlock() {
        Err(Error::Lost { name, reason }) => {
            assert_eq!(name, "overwritten");
            assert_eq!(reason, LostReason::Overwritten);
        }
        other => panic!("unlock returned {other:?}"),
    }
    let value: String = server.cmd(&["GET", "overwritten"]);
    assert_eq!(value, "not a lock", "the foreign value is left alone");
}

#[test]
fn a_renewal_that_finds_another_type_says_overwritten() {
    let server = RedisServer::start();
    let client = server.watchdog_client(Duration::from_millis(300));
    let guard = client.lock("retyped").lock().expect("lock");
    let _: () = server.cmd(&["SET", "retyped", "x"]);
    assert!(eventually(Duration::from_secs(2), || guard.is_lost()));
    assert_eq!(guard.lost_reason(), Some(LostReason::Overwritten));
    match guard.unlock() {
        Err(e @ Error::Lost { .. }) => assert!(e.to_string().contains("another type"), "{e}"),
        other => panic!("unlock returned {other:?}"),
    }
}

#[test]
fn a_lease_that_runs_out_while_redis_is_frozen_is_logged_with_its_reason() {
    logs::install();
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .watchdog_timeout(Duration::from_millis(600))
        .response_timeout(Duration::from_millis(200))
        .build()
        .expect("client");
    let guard = client.lock("ran-out").lock().expect("lock");
    server.pause();
    let lost = eventually(Duration::from_secs(3), || guard.is_lost());
    server.resume();
    assert!(lost, "never lost while the server was frozen");
    assert_eq!(guard.lost_reason(), Some(LostReason::LeaseExpired));
    assert!(
        logs::lines().iter().any(|line| line.starts_with("WARN")
            && line.contains("ran-out")
            && line.contains("lease ran out")),
        "{:?}",
        logs::lines()
    );
    match guard.unlock() {
        Err(Error::Lost { reason, .. }) => assert_eq!(reason, LostReason::LeaseExpired),
        other => panic!("unlock returned {other:?}"),
    }
}

#[test]
fn a_replaced_hold_is_reported_even_when_the_acquire_reply_is_lost() {
    let (server, proxy, client) = Proxy::with_client();
    let lock = client.lock("replaced");
    let first = lock
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("lock");
    // The hold vanishes (another client may have held the lock meanwhile).
    let _: () = server.cmd(&["DEL", "replaced"]);
    // The reentry finds it gone and takes it afresh (-3); that reply is lost
    // with its connection, and the acquire is sent again.
    let second = proxy.losing_the_reply_to("replaced", || lock.lock().expect("lock again"));
    assert_eq!(
        first.lost_reason(),
        Some(LostReason::Replaced),
        "the old guard was never told"
    );
    assert!(!second.is_lost());
    let count: String = server.cmd(&["HGET", "replaced", &client.owner_field()]);
    assert_eq!(count, "1", "the fresh hold counts once");
    assert!(matches!(
        first.unlock(),
        Err(Error::Lost {
            reason: LostReason::Replaced,
            ..
        })
    ));
    second.unlock().expect("unlock");
    assert!(!exists(&server, "replaced"));
}

#[test]
fn a_response_timeout_is_a_timeout_error() {
    let (_server, proxy) = Proxy::with_server();
    let client = Client::builder(proxy.url())
        .response_timeout(Duration::from_millis(200))
        .build()
        .expect("client");
    proxy.arm("slow-reply", Fault::DelayReply(Duration::from_millis(800)));
    match client.lock("slow-reply").try_lock() {
        Err(error @ Error::Timeout { operation, after }) => {
            assert_eq!(operation, "lock");
            assert_eq!(after, Duration::from_millis(200));
            assert!(error.is_transient());
        }
        other => panic!("try_lock returned {other:?}"),
    }
}
