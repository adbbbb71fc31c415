//! Redisson's protocol constants and name derivation, in one place
//! (docs/wire-format.md, "Names", "Pub/sub", "The unlock latch"): key prefixes, channels, messages.
//!
//! The rule is Redisson's, quirks included: a name that contains `{` anywhere
//! is used verbatim, otherwise it is wrapped in braces so that every derived
//! key shares the lock's cluster slot.

use std::time::Duration;

/// Redisson's unlock channel prefix (note the double underscore).
pub(crate) const LOCK_CHANNEL_PREFIX: &str = "redisson_lock__channel";
/// Redisson's unlock latch prefix (since 3.24.0).
pub(crate) const UNLOCK_LATCH_PREFIX: &str = "redisson_unlock_latch";

/// Redisson's UNLOCK_MESSAGE: wakes one waiter (docs/wire-format.md, "Pub/sub").
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// Redisson's READ_UNLOCK_MESSAGE: wakes every waiter (docs/wire-format.md, "Pub/sub"); sent
/// by write unlocks.
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// A fenced lock's token counter (docs/wire-format.md, "Fenced lock").
pub(crate) const TOKEN_PREFIX: &str = "redisson_lock_token";

/// A fair lock's queue of waiting owner fields, a LIST (docs/wire-format.md, "Fair locks").
pub(crate) const FAIR_QUEUE_PREFIX: &str = "redisson_lock_queue";
/// A fair lock's waiters' deadlines (client epoch ms), a ZSET (docs/wire-format.md, "Fair locks").
pub(crate) const FAIR_TIMEOUT_PREFIX: &str = "redisson_lock_timeout";
/// Redisson's `fairLockWaitTimeout` default: the wait a fair lock queues a
/// thread with when it has no wait budget of its own (docs/wire-format.md, "Keys").
pub(crate) const FAIR_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Redisson's default `lockWatchdogTimeout`: the lease of a lock taken
/// without an explicit one, renewed every third of it.
pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
/// Redisson's `connectTimeout` (10 s): opening a connection, or waiting
/// for a pooled one.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Redisson's `timeout` (3 s): waiting for one reply.
pub(crate) const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// Redisson's `retryAttempts` (3) and `retryInterval` (here 500 ms) for an
/// unlock whose reply was lost.
pub(crate) const DEFAULT_RETRY_ATTEMPTS: u32 = 3;
pub(crate) const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(500);
/// Redisson's `subscriptionTimeout` (7.5 s).
pub(crate) const DEFAULT_SUBSCRIPTION_TIMEOUT: Duration = Duration::from_millis(7500);
/// Redisson's `slavesSyncTimeout` (1 s): the `WAIT` after a lock write.
pub(crate) const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(1);
/// Command connections per pool (per master in a cluster).
pub(crate) const DEFAULT_POOL_SIZE: u32 = 32;
/// Shared sockets per server of a client without replica sync
/// (`ClientBuilder::multiplexed`'s default).
pub(crate) const DEFAULT_MULTIPLEXED: u32 = 4;
/// The error text of a non-reentrant lock's reentry (docs/wire-format.md, "Non-reentrant lock").
pub(crate) const NON_REENTRANT_REACQUIRE: &str = "NON_REENTRANT_REACQUIRE";

/// The read/write lock channel prefix, shared by readers and writers
/// (docs/wire-format.md, "Read/write lock").
pub(crate) const RWLOCK_CHANNEL_PREFIX: &str = "redisson_rwlock";

/// The hash field holding a read/write lock's mode (`read` or `write`).
pub(crate) const RWLOCK_MODE_FIELD: &str = "mode";

/// The suffix of a write hold's owner field (docs/wire-format.md, "Keys").
pub(crate) const WRITE_FIELD_SUFFIX: &str = ":write";

/// Redisson's count-down latch channel prefix (docs/synchronizers.md): the
/// channel is this, `{`, the name and `}`, with no colon and no
/// `prefixName` rule.
pub(crate) const LATCH_CHANNEL_PREFIX: &str = "redisson_countdownlatch__channel__";

/// Redisson's latch `ZERO_COUNT_MESSAGE`: the count reached 0 (opens Java's
/// latch, wakes every waiter).
pub(crate) const LATCH_ZERO_COUNT_MESSAGE: &str = "0";

/// Redisson's latch `NEW_COUNT_MESSAGE`: a count was set, or the latch was
/// deleted (closes Java's latch again).
pub(crate) const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// The channel of the count-down latch `name`:
/// `redisson_countdownlatch__channel__{<name>}`, braces added even when the
/// name has some (so a name with a `}` puts it in another cluster slot than
/// the key, docs/synchronizers.md).
pub(crate) fn latch_channel(name: &str) -> String {
    concat(&[LATCH_CHANNEL_PREFIX, "{", name, "}"])
}

/// `suffixName(name, suffix)`, the suffix given in parts.
fn suffix_name(name: &str, suffix: &[&str]) -> String {
    if name.contains('{') {
        concat_iter([name, ":"].into_iter().chain(suffix.iter().copied()))
    } else {
        concat_iter(["{", name, "}:"].into_iter().chain(suffix.iter().copied()))
    }
}

/// The read/write lock's channel, `redisson_rwlock:{<name>}`.
pub(crate) fn rwlock_channel(name: &str) -> String {
    prefix_name(RWLOCK_CHANNEL_PREFIX, name)
}

/// The prefix every reader's marker keys share: `{<name>}`, or `<name>`
/// when it contains `{` (so `<prefix>:<field>` is `suffixName(name, field)`).
pub(crate) fn rwlock_key_prefix(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        concat(&["{", name, "}"])
    }
}

/// A reader's marker key prefix: `suffixName(name, field) +
/// ":rwlock_timeout"`; hold `n` owns `<this>:<n>`.
pub(crate) fn rwlock_timeout_prefix(name: &str, field: &str) -> String {
    suffix_name(name, &[field, ":rwlock_timeout"])
}

/// A spin lock's first sleep between attempts (Redisson's default
/// exponential backoff, docs/wire-format.md, "Spin lock").
pub(crate) const SPIN_INITIAL_DELAY_MS: u64 = 1;
/// A spin lock's longest sleep between attempts (docs/wire-format.md, "Spin lock").
pub(crate) const SPIN_MAX_DELAY_MS: u64 = 128;

/// `prefixName(prefix, name)`.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        concat(&[prefix, ":", name])
    } else {
        concat(&[prefix, ":{", name, "}"])
    }
}

/// The channel of an RSemaphore (and of an RPermitExpirableSemaphore of the
/// same name), `redisson_sc:{<name>}` (docs/synchronizers.md): the permit
/// counts its writers publish.
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// A permit-expirable semaphore's ZSET of acquired permit ids,
/// `suffixName(name, "timeout")`: `{<name>}:timeout` (docs/synchronizers.md).
pub(crate) fn permit_expirable_timeout_key(name: &str) -> String {
    suffix_name(name, &["timeout"])
}

/// A permit-expirable semaphore's "permanent" expiry score
/// (`Long.MAX_VALUE / 10000`, docs/synchronizers.md): a permit acquired without
/// a lease carries it in the timeout ZSET.
pub(crate) const PES_PERMANENT_SCORE: u64 = 922_337_203_685_477;

/// The pub/sub channel on which an RLock's release is announced.
pub(crate) fn lock_channel(name: &str) -> String {
    prefix_name(LOCK_CHANNEL_PREFIX, name)
}

/// The key that makes one unlock request idempotent.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    if name.contains('{') {
        concat(&[UNLOCK_LATCH_PREFIX, ":", name, ":", request_id])
    } else {
        concat(&[UNLOCK_LATCH_PREFIX, ":{", name, "}:", request_id])
    }
}

/// The key that lets an acquire sent again after a lost reply see that the
/// first one found the caller's holds gone. This crate's own, not Redisson's
/// (only its writer reads it); it lives among the unlock latches, under a
/// fresh request id, so that it needs no ACL permission of its own.
pub(crate) fn replaced_marker(name: &str, attempt_id: &str) -> String {
    unlock_latch(name, attempt_id)
}

/// `parts` joined, in one allocation of the exact size: names are built on
/// every acquire and release, where `format!` costs several times more.
pub(crate) fn concat(parts: &[&str]) -> String {
    concat_iter(parts.iter().copied())
}

fn concat_iter<'a>(parts: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut out = String::with_capacity(parts.clone().map(str::len).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// Decimal digits of a `u64` without the formatting machinery.
#[derive(Default)]
pub(crate) struct Decimal([u8; 20]);

impl Decimal {
    pub fn of(&mut self, mut n: u64) -> &[u8] {
        if n < 10 {
            self.0[0] = b'0' + n as u8;
            return &self.0[..1];
        }
        let mut at = self.0.len();
        loop {
            at -= 1;
            self.0[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                return &self.0[at..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_digits_of_edge_values() {
        for n in [0u64, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(Decimal::default().of(n), n.to_string().as_bytes());
        }
    }

    #[test]
    fn plain_names_get_a_hash_tag() {
        assert_eq!(lock_channel("myLock"), "redisson_lock__channel:{myLock}");
        assert_eq!(
            unlock_latch("orders", "00ff"),
            "redisson_unlock_latch:{orders}:00ff"
        );
    }

    #[test]
    fn semaphore_channels_follow_prefix_name() {
        assert_eq!(semaphore_channel("sem"), "redisson_sc:{sem}");
        assert_eq!(semaphore_channel("{t}sem"), "redisson_sc:{t}sem");
    }

    #[test]
    fn rwlock_markers_follow_suffix_name() {
        assert_eq!(rwlock_channel("rw"), "redisson_rwlock:{rw}");
        assert_eq!(
            rwlock_timeout_prefix("rw", "u:1"),
            "{rw}:u:1:rwlock_timeout"
        );
        assert_eq!(
            rwlock_timeout_prefix("{t}rw", "u:1"),
            "{t}rw:u:1:rwlock_timeout"
        );
        assert_eq!(rwlock_key_prefix("rw"), "{rw}");
        assert_eq!(rwlock_key_prefix("a{b"), "a{b");
    }

    #[test]
    fn latch_channels_always_wrap_the_name_in_braces() {
        assert_eq!(
            latch_channel("job"),
            "redisson_countdownlatch__channel__{job}"
        );
        assert_eq!(
            latch_channel("{job}:latch"),
            "redisson_countdownlatch__channel__{{job}:latch}"
        );
    }

    #[test]
    fn semaphore_names_follow_prefix_and_suffix_name() {
        assert_eq!(semaphore_channel("s"), "redisson_sc:{s}");
        assert_eq!(semaphore_channel("{t}s"), "redisson_sc:{t}s");
        assert_eq!(permit_expirable_timeout_key("s"), "{s}:timeout");
        assert_eq!(permit_expirable_timeout_key("{t}s"), "{t}s:timeout");
        assert_eq!(PES_PERMANENT_SCORE, (i64::MAX / 10_000) as u64);
    }

    #[test]
    fn names_with_a_brace_anywhere_are_used_verbatim() {
        assert_eq!(lock_channel("{user}:1"), "redisson_lock__channel:{user}:1");
        // Redisson only tests for `{`; a broken tag is not "fixed".
        assert_eq!(lock_channel("a{b"), "redisson_lock__channel:a{b");
        assert_eq!(lock_channel("a{}b"), "redisson_lock__channel:a{}b");
        assert_eq!(lock_channel("a}b"), "redisson_lock__channel:{a}b}");
    }
}
