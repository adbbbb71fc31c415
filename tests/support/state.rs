//! What the locks leave in Redis, read back the way the tests compare it:
//! a lock's hash, its PTTL, a fair lock's queue, the subscribers of a
//! channel, and the names of the Redisson keys and channels.

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::{Kind, Lock, LockGuard, LockKind, RwMode};

use super::{RedisServer, eventually};

/// What `Client::inspect` reports for a read/write lock held for writing.
pub const WRITE_LOCKED: LockKind = LockKind::ReadWrite {
    mode: RwMode::Write,
};

/// The calls of `commands` (lowercase, as `INFO commandstats` names them)
/// that the server of `con` has counted so far, summed.
pub fn command_calls(con: &mut redis::Connection, commands: &[&str]) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    commands
        .iter()
        .map(|command| {
            let prefix = format!("cmdstat_{command}:calls=");
            info.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// Every field of the hash `key` (empty when the key does not exist).
pub fn hgetall(server: &RedisServer, key: &str) -> HashMap<String, String> {
    server.cmd(&["HGETALL", key])
}

/// The hash a test expects, from `(field, value)` pairs: compare it with
/// [`hgetall`].
pub fn state(fields: &[(&str, &str)]) -> HashMap<String, String> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `PTTL key`: the milliseconds left, -1 without a TTL, -2 without the key.
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

/// Whether `key` exists.
pub fn exists(server: &RedisServer, key: &str) -> bool {
    server.cmd(&["EXISTS", key])
}

/// Subscribers of `channel` (all clients of the server).
pub fn numsub(server: &RedisServer, channel: &str) -> i64 {
    let reply: (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    reply.1
}

/// The channel Redisson publishes the unlock of the lock `name` on.
pub fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// The waiting queue of the fair lock `name`, head first.
pub fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&[
        "LRANGE",
        &format!("redisson_lock_queue:{{{name}}}"),
        "0",
        "-1",
    ])
}

/// Waits up to `within` until the queue of the fair lock `name` is
/// `expected`.
pub fn queued(server: &RedisServer, name: &str, expected: &[String], within: Duration) {
    assert!(
        eventually(within, || queue(server, name) == expected),
        "queue {:?}, expected {expected:?}",
        queue(server, name)
    );
}

/// Asserts that `lock` is free once its holds were released: a lost reply
/// left no phantom hold behind.
pub fn assert_no_phantom_hold<K: Kind>(lock: &Lock<K>) {
    assert!(
        !lock.is_locked().expect("is_locked"),
        "a phantom hold kept it"
    );
}

/// Asserts that `lock` cannot be taken now (`try_lock` gives `None`): it is
/// held elsewhere, by Java or another client.
pub fn assert_held_elsewhere<K: Kind>(lock: &Lock<K>) {
    assert!(
        lock.try_lock().expect("try_lock").is_none(),
        "took a lock held elsewhere"
    );
}

/// Asserts that `lock` is free now: `try_lock` takes it at once (it is then
/// released again).
pub fn assert_free<K: Kind>(lock: &Lock<K>) {
    let guard = lock
        .try_lock()
        .expect("try_lock")
        .expect("the lock is free, and nobody thinks otherwise");
    guard.unlock().expect("unlock");
}

/// Takes `lock` and enters it again (a reentry): the outer and the inner
/// guard.
pub fn lock_twice<K: Kind>(lock: &Lock<K>) -> (LockGuard<K>, LockGuard<K>) {
    let outer = lock.lock().expect("lock");
    let inner = lock.lock().expect("reentry");
    (outer, inner)
}
