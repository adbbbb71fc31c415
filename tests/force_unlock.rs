//! `force_unlock`: deletes the lock whoever holds it, announces the release,
//! and makes this client's own guards on it lost.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, LostReason};
use support::state::{exists, lock_twice};
use support::waiter::Waiter;
use support::{RedisServer, eventually};

const JAVA_FIELD: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d:77";

#[test]
fn force_unlock_deletes_another_owners_lock_publishes_zero_and_wakes_a_waiter() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["HSET", "stuck", JAVA_FIELD, "3"]);
    let _: () = server.cmd(&["PEXPIRE", "stuck", "30000"]);
    let channel = "redisson_lock__channel:{stuck}";
    let client = server.client();

    let waiter = Waiter::lock(client.lock("stuck"));
    assert!(eventually(Duration::from_secs(5), || {
        let (_, subscribers): (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", channel]);
        subscribers == 1 && client.diagnostics().waiters == 1
    }));
    let mut watcher = server.subscriber(&[channel]);

    let forced = Instant::now();
    assert!(client.lock("stuck").force_unlock().expect("force_unlock"));
    // Woken by the force unlock's message, not at the 30 s TTL.
    waiter.woken_within(forced, Duration::from_millis(500), Duration::from_secs(10));

    let messages = watcher.messages_within(Duration::from_millis(300));
    let payloads: Vec<&str> = messages.iter().map(|m| m.payload.as_str()).collect();
    assert_eq!(
        payloads,
        vec!["0", "0"],
        "one \"0\" from force_unlock, one from the waiter's own release"
    );
    assert!(!exists(&server, "stuck"));
}

#[test]
fn force_unlock_of_a_free_lock_returns_false_and_publishes_nothing() {
    let (server, client) = RedisServer::start_with_client();
    let mut watcher = server.subscriber(&["redisson_lock__channel:{nothing}"]);
    assert!(!client.lock("nothing").force_unlock().expect("force_unlock"));
    assert_eq!(watcher.next_message(Duration::from_millis(300)), None);
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn force_unlock_makes_this_clients_guards_lost() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("mine");
    let (first, second) = lock_twice(&lock);
    assert_eq!(client.diagnostics().registered_holds, 1);

    assert!(lock.force_unlock().expect("force_unlock"));
    assert!(first.is_lost());
    assert!(second.is_lost());
    assert_eq!(client.diagnostics().registered_holds, 0);
    assert!(!lock.is_locked().expect("locked"));

    // Someone else takes it; the lost guards must not release it.
    let other = Client::open(server.url()).expect("other client");
    let theirs = other.lock("mine").lock().expect("other's lock");
    assert!(
        matches!(second.unlock(), Err(Error::Lost { name, reason: LostReason::ForceUnlocked }) if name == "mine")
    );
    assert!(matches!(
        first.unlock(),
        Err(Error::Lost { .. } | Error::NotHeld { .. })
    ));
    let state: std::collections::HashMap<String, String> = server.cmd(&["HGETALL", "mine"]);
    assert_eq!(
        state,
        std::collections::HashMap::from([(other.owner_field(), "1".to_string())])
    );
    theirs.unlock().expect("the other client's unlock");
}

#[test]
fn force_unlock_from_another_thread_makes_the_holders_guard_lost() {
    let (_server, client) = RedisServer::start_with_client();
    let lock = client.lock("crossthread");
    let (held_tx, held_rx) = mpsc::channel();
    let (forced_tx, forced_rx) = mpsc::channel::<()>();
    let holder = {
        let lock = lock.clone();
        thread::spawn(move || {
            let guard = lock.lock().expect("lock");
            held_tx.send(()).expect("report");
            forced_rx.recv().expect("wait for the force");
            let lost = guard.is_lost();
            (lost, guard.unlock())
        })
    };
    held_rx.recv().expect("held");
    assert!(lock.force_unlock().expect("force_unlock"));
    forced_tx.send(()).expect("tell");
    let (lost, unlocked) = holder.join().expect("holder");
    assert!(lost);
    assert!(matches!(unlocked, Err(Error::Lost { .. })), "{unlocked:?}");
    assert_eq!(client.diagnostics().registered_holds, 0);
}

/// Another client's force unlock reaches the holder at its next renewal:
/// the holder's [`redisson_lock::LostSignal`] fires within a third of the
/// watchdog timeout (the renewal period) plus a round trip, with
/// `KeyGone` (only this client's own `force_unlock` can say
/// `ForceUnlocked`: from another client the holder sees its field gone).
/// The bound docs/cli.md, docs/guide.md and the README state (10 s with the
/// default 30 s watchdog timeout).
#[test]
fn another_clients_force_unlock_reaches_the_holder_within_a_renewal_period() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(3);
    let holder = server.watchdog_client(watchdog);
    let operator = server.client();
    for round in 0..3 {
        let guard = holder.lock("bounded").lock().expect("lock");
        let lost = guard.lost_signal();
        // A different moment within the renewal period each round.
        thread::sleep(Duration::from_millis(150 + 400 * round));
        let forced = Instant::now();
        assert!(
            operator
                .lock("bounded")
                .force_unlock()
                .expect("force_unlock")
        );
        let reason = lost.wait_timeout(watchdog);
        let took = forced.elapsed();
        assert_eq!(reason, Some(LostReason::KeyGone), "round {round}");
        assert!(
            took <= watchdog / 3 + Duration::from_millis(500),
            "round {round}: the holder learnt it {took:?} after the force unlock"
        );
        assert!(guard.is_lost());
        assert!(matches!(guard.unlock(), Err(Error::Lost { .. })));
    }
}
