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
