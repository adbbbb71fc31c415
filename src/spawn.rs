//! The client's long-lived threads, started one way.

use std::thread;

use crate::error::{Error, Result};

/// Starts `body` on a thread called `name` (detached); when the system
/// gives no thread, [`Error::Unavailable`] saying it cannot start `what`.
pub(crate) fn spawn(name: &str, what: &str, body: impl FnOnce() + Send + 'static) -> Result<()> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map_err(|e| Error::Unavailable {
            reason: format!("cannot start {what}: {e}"),
        })?;
    Ok(())
}
