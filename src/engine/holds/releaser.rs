//! How a hold is released without its guard: what
//! [`crate::Client::shutdown`] does to the holds whose threads did not
//! release them in time.

use super::Hold;
use crate::error::Result;

/// Releases the hold of the owner field it is given, whole, in Redis, the
/// way its lock type's guard would (one round trip); set by the layer that
/// knows the type when the hold starts.
pub(crate) type Releaser = Box<dyn Fn(&str) -> Result<()> + Send + Sync>;

impl Hold {
    /// Gives the hold its releaser, made by `make` unless it has one (a
    /// reentry joins a hold that has). No I/O.
    pub fn set_releaser(&self, make: impl FnOnce() -> Releaser) {
        if self.releaser.get().is_none() {
            let _ = self.releaser.set(make());
        }
    }

    /// Releases the hold in Redis through its releaser (nothing without
    /// one). One round trip.
    pub fn release_in_redis(&self) -> Result<()> {
        match self.releaser.get() {
            Some(release) => release(&self.field),
            None => Ok(()),
        }
    }
}
