//! Redis Cluster (3 masters + 3 replicas, started once for this binary):
//! slots computed by the crate agree with the server's, every lock type
//! works on names served by different masters, waiters wake promptly,
//! MOVED during acquire, unlock and renewal is followed, and a timed-out
//! acquire is never sent again.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::cluster::Cluster;
use support::eventually;

fn cluster() -> &'static Cluster {
    Cluster::shared()
}

fn client() -> Client {
    Client::cluster_builder(cluster().urls())
        .build()
        .expect("cluster client")
}

#[test]
fn every_lock_type_acquires_excludes_and_releases_on_every_master() {
    let cluster = cluster();
    let names = cluster.names_on_different_masters("types-", 3);
    let (a, b) = (client(), client());
    for name in &names {
        macro_rules! check {
            ($get:ident, $what:literal) => {{
                let name = format!("{}-{}", name, $what);
                let held = a.$get(&name).try_lock().expect("try_lock").expect("free");
                assert!(
                    b.$get(&name).try_lock().expect("try_lock").is_none(),
                    "{} {name} excludes",
                    $what
                );
                assert!(cluster.owner(&name).cmd::<bool>(&["EXISTS", &name]));
                held.unlock().expect("unlock");
                let other = b.$get(&name).try_lock().expect("try_lock");
                assert!(other.is_some(), "{} {name} free after unlock", $what);
                drop(other);
                assert!(!b.$get(&name).is_locked().expect("is_locked"));
            }};
        }
        check!(lock, "lock");
        check!(fair_lock, "fair");
        check!(fenced_lock, "fenced");
        check!(spin_lock, "spin");
        check!(non_reentrant_lock, "nonreentrant");
        check!(non_reentrant_fair_lock, "nonreentrantfair");
        // Read/write: a writer excludes readers and writers; readers share.
        let rw = format!("{name}-rw");
        let write = a.read_write_lock(&rw).write_lock().try_lock().expect("w").expect("free");
        assert!(b.read_write_lock(&rw).read_lock().try_lock().expect("r").is_none());
        write.unlock().expect("unlock");
        let r1 = a.read_write_lock(&rw).read_lock().try_lock().expect("r").expect("free");
        let r2 = b.read_write_lock(&rw).read_lock().try_lock().expect("r").expect("shared");
        assert!(b.read_write_lock(&rw).write_lock().try_lock().expect("w").is_none());
        drop((r1, r2));
        assert!(b.read_write_lock(&rw).write_lock().try_lock().expect("w").is_some());
    }
}
