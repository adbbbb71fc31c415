//! A master with one replica, and clients that check replica sync: what
//! the replica-sync tests (locks and synchronizers) start from.

use std::time::Duration;

use redisson_lock::Client;

use super::RedisServer;

/// A master and a replica that has finished its first sync.
pub fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    assert!(
        super::eventually(Duration::from_secs(10), || {
            let info: String = master.cmd(&["INFO", "replication"]);
            info.contains("connected_slaves:1") && info.contains("state=online")
        }),
        "the replica did not come online"
    );
    (master, replica)
}

/// A client of `master` whose writes wait for its replica (a `WAIT` of
/// 200 ms), failing them when unacknowledged if `check`; 2 retries 20 ms
/// apart (3 attempts in all).
pub fn synced_client(master: &RedisServer, check: bool) -> Client {
    Client::builder(master.url())
        .check_lock_synced_replicas(check)
        .replicas_sync_timeout(Duration::from_millis(200))
        .unlock_retries(2, Duration::from_millis(20))
        .build()
        .expect("client")
}
