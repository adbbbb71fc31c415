//! The builder's Redisson compatibility knobs: the fleet's oldest Redisson
//! version ([`ClientBuilder::redisson_compat`]) and the individual settings
//! it implies (docs/compat.md).

use crate::client::ClientBuilder;
use crate::config::PermitIdEncoding;
use crate::config::compat::{self, Compat};

impl ClientBuilder {
    /// Makes this client interoperate with a Java fleet whose **oldest**
    /// Redisson is `version` (e.g. `"3.16.8"`), setting every compatibility
    /// behaviour at once (docs/compat.md):
    ///
    /// | Fleet's oldest Redisson | Setting |
    /// |---|---|
    /// | up to 3.16.8 | [`expirable_permit_ids`](Self::expirable_permit_ids)`(`[`PermitIdEncoding::Hex`]`)` (raw bytes from 3.17.0) |
    /// | up to 3.13.2 | [`fair_lock_wait_timeout`](Self::fair_lock_wait_timeout)`(5 s)` (300 s from 3.13.3), and a fair lock's timed acquire queues with it rather than with its own wait (no knob of its own) |
    /// | up to 3.21.x, in a cluster | [`sharded_subscription`](Self::sharded_subscription)`(`[`ShardedSubscription::Both`](crate::ShardedSubscription::Both)`)` (the builder's own choice, `Auto` by default, from 3.22.0) |
    /// | any 3.x | [`read_unlock_keeps_unmarked_readers`](Self::read_unlock_keeps_unmarked_readers)`(true)` (Redisson 3.44–3.52's read-lock renewal defect) |
    ///
    /// **Precedence:** a knob set explicitly wins, whatever the order of
    /// the calls: `redisson_compat` fills in only the knobs not set by their
    /// own method. Of several `redisson_compat` calls, the last wins.
    ///
    /// **Versions:** `MAJOR.MINOR[.PATCH]` in decimal digits (`"3.12"` is
    /// 3.12.0), surrounding whitespace and one leading `v` allowed. A text
    /// that does not parse (`"3.x"`, `""`, `"3.24.3-SNAPSHOT"`), a version
    /// older than 3.12.0 (whose wire this crate does not know), or a major
    /// above 4 (a new major may change the wire) makes
    /// [`build`](Self::build) fail with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), naming the
    /// supported range, 3.12.0 to 4.x. A 4.x newer than the newest surveyed
    /// (4.7) is taken as 4.7, with a warning logged at build. No round trip;
    /// the version is parsed here and checked by `build`.
    pub fn redisson_compat(mut self, version: &str) -> Self {
        self.compat = Some(
            compat::parse(version)
                .map(Compat::for_version)
                .map_err(|e| e.to_string()),
        );
        self
    }

    /// How a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)
    /// writes the ids of the permits it acquires: [`PermitIdEncoding::Raw`]
    /// (16 bytes, Redisson 3.17.0+, the default) or
    /// [`PermitIdEncoding::Hex`] (32-character lowercase hex text, Redisson
    /// up to 3.16.8, which can release only permits stored that way).
    /// Releases, lease updates and lease queries find a permit stored
    /// either way, whatever this says (no extra round trip). Set
    /// explicitly, it wins over [`redisson_compat`](Self::redisson_compat).
    pub fn expirable_permit_ids(mut self, encoding: PermitIdEncoding) -> Self {
        self.config.permit_ids = encoding;
        self.explicit.permit_ids = true;
        self
    }

    /// Redisson 3.x's read unlock (`true`), for a fleet with Redisson
    /// 3.44.0–3.52.0 readers: those renew a read lock's hash but not their
    /// `rwlock_timeout` markers (docs/compat.md), so that their markers
    /// vanish while they still hold. With `true`, this client's read unlock
    /// never deletes, nor shortens the TTL of, a read lock in which another
    /// reader field still counts holds without a live marker: the hash is
    /// left to its TTL (which its holder's watchdog renews), and so no
    /// writer gets in under a Java reader. What it costs: a lock whose such
    /// reader crashed stays read-locked until its TTL runs out (at most the
    /// Java watchdog timeout) rather than being freed at once. With `false`
    /// (the default, Redisson 4.x's rule), the hash lives as long as the
    /// longest-lived marker of any reader. Same script, same round trip
    /// either way. Set explicitly, it wins over
    /// [`redisson_compat`](Self::redisson_compat) (which sets `true` for any
    /// 3.x).
    pub fn read_unlock_keeps_unmarked_readers(mut self, keep: bool) -> Self {
        self.config.read_unlock_keeps_unmarked = keep;
        self.explicit.read_unlock = true;
        self
    }
}
