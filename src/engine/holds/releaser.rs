//! How a hold is released without its guard: what
//! [`crate::Client::shutdown`] does to the holds whose threads did not
//! release them in time.

use std::sync::Arc;

use super::Hold;
use crate::engine::Engine;
use crate::error::Result;

/// A hold's lock type as the registry needs it: the Redisson class its
/// events name, and how a shutdown releases a hold of that type. One
/// `static` per type, so a hold keeps a pointer to it (no closure, no
/// allocation per hold).
pub(crate) struct HoldKind {
    /// The Redisson class, e.g. `RedissonLock`.
    pub class: &'static str,
    /// Releases `hold` whole in Redis, the way its type's guard would (one
    /// round trip), on `engine`'s client.
    pub release: fn(&Arc<Engine>, &Hold) -> Result<()>,
}

impl HoldKind {
    /// A kind with no class and nothing to release (the registry's own
    /// tests).
    pub const NONE: HoldKind = HoldKind {
        class: "",
        release: |_, _| Ok(()),
    };
}

impl Hold {
    /// Releases the hold in Redis the way its type's guard would, on
    /// `engine`'s client. One round trip.
    pub fn release_in_redis(&self, engine: &Arc<Engine>) -> Result<()> {
        (self.kind.release)(engine, self)
    }
}
