//! `Client::watch_lock`: a lock's releases and expiries as events, on the
//! client's own subscriber; the watch ends with its drop or the client's
//! shutdown.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::WatchEvent;
use support::state::{channel, numsub};
use support::{RedisServer, assert_waiting, eventually};

#[test]
fn a_watch_sees_a_release_then_an_expiry_and_ends_with_its_drop() {
    let server = RedisServer::start();
    let (holder, watcher) = (server.client(), server.client());
    let watch = watcher.watch_lock("watched").expect("watch");
    assert_eq!(watch.name(), "watched");
    // Parked on the watcher's subscriber like a waiting thread.
    assert_waiting(&watcher, 1, Duration::from_secs(5));
    assert_eq!(numsub(&server, &channel("watched")), 1);

    let lock = holder.lock("watched");
    let guard = lock.lock().expect("lock");
    let released_at = Instant::now();
    guard.unlock().expect("unlock");
    let event = watch.events().recv_timeout(Duration::from_secs(2));
    println!("release -> {event:?} in {:?}", released_at.elapsed());
    assert_eq!(event, Ok(WatchEvent::Released));

    // Left to expire in 1.5 s (longer than the watch's 1 s look, which
    // sees a hold taken meanwhile): no unlock message, an expiry.
    lock.lock()
        .expect("lock")
        .keep_for(Duration::from_millis(1500))
        .expect("keep_for");
    let kept_at = Instant::now();
    let event = watch.events().recv_timeout(Duration::from_secs(4));
    let seen = kept_at.elapsed();
    println!("expiry (1.5 s lease) -> {event:?} after {seen:?}");
    assert_eq!(event, Ok(WatchEvent::Expired));
    assert!(seen >= Duration::from_millis(1490), "{seen:?}");
    assert!(seen < Duration::from_millis(1700), "{seen:?}");
    assert!(watch.events().try_recv().is_err(), "one event per change");

    drop(watch);
    assert_waiting(&watcher, 0, Duration::from_secs(1));
    assert!(eventually(Duration::from_secs(1), || numsub(
        &server,
        &channel("watched")
    ) == 0));
}

#[test]
fn a_watch_ends_with_its_clients_shutdown() {
    let server = RedisServer::start();
    let client = server.client();
    let watch = client.watch_lock("watched-down").expect("watch");
    assert_waiting(&client, 1, Duration::from_secs(5));
    client.shutdown(Duration::ZERO).expect("shutdown");
    // Ended: its channel disconnected.
    assert!(
        watch
            .events()
            .recv_timeout(Duration::from_millis(500))
            .is_err_and(|e| e.is_disconnected())
    );
    assert!(matches!(
        client.watch_lock("watched-down"),
        Err(redisson_lock::Error::Closed)
    ));
    assert!(matches!(
        client.watch_lock(""),
        Err(redisson_lock::Error::Closed | redisson_lock::Error::InvalidArgument(_))
    ));
}

#[test]
fn a_watch_on_a_cluster_client_sees_a_release() {
    let cluster = support::cluster::Cluster::shared();
    let (holder, watcher) = (cluster.client(), cluster.client());
    let watch = watcher.watch_lock("watched-cluster").expect("watch");
    assert_waiting(&watcher, 1, Duration::from_secs(5));
    holder
        .lock("watched-cluster")
        .lock()
        .expect("lock")
        .unlock()
        .expect("unlock");
    assert_eq!(
        watch.events().recv_timeout(Duration::from_secs(2)),
        Ok(WatchEvent::Released)
    );
    drop(watch);
    assert_waiting(&watcher, 0, Duration::from_secs(1));
}

#[test]
fn a_watch_on_a_cluster_client_counts_a_subscription_whose_slot_moved_as_a_release() {
    let cluster = support::cluster::Cluster::shared();
    let name = "watched-moved";
    let watcher = cluster.client();
    // Held (a hash without a TTL) on the slot's master, watched there.
    let from = cluster.owner(name);
    let _: i64 = from.cmd(&["HSET", name, "holder:1", "1"]);
    let watch = watcher.watch_lock(name).expect("watch");
    assert_waiting(&watcher, 1, Duration::from_secs(5));

    // The slot moves; the new master serves it before the old one lets its
    // shard subscribers go, and the lock is released there meanwhile: the
    // unlock message reaches nobody.
    let slot = cluster.slot(name);
    let to = *cluster
        .masters()
        .iter()
        .find(|m| m.port != from.port)
        .expect("another master");
    cluster.begin_migration(slot, to);
    let port = to.port.to_string();
    let _: String = from.cmd(&["MIGRATE", "127.0.0.1", &port, name, "0", "5000"]);
    let _: () = to.cmd(&["CLUSTER", "SETSLOT", &slot.to_string(), "NODE", &to.id()]);
    let _: i64 = to.cmd(&["DEL", name]);
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let heard: i64 = to.cmd(&["SPUBLISH", &channel, "0"]);
    assert_eq!(heard, 0, "nobody listens at the new master yet");
    cluster.finish_migration(slot, to);

    // The watch subscribes again at the new master and tells of the
    // release it may have missed.
    assert_eq!(
        watch.events().recv_timeout(Duration::from_secs(5)),
        Ok(WatchEvent::Released)
    );
    // Once per move: listening at the new master, nothing more happens.
    assert_eq!(
        watch.events().recv_timeout(Duration::from_millis(1500)),
        Err(crossbeam_channel::RecvTimeoutError::Timeout)
    );
    drop(watch);
    assert_waiting(&watcher, 0, Duration::from_secs(1));
}
