//! The client's long-lived threads, started one way.

use std::thread;

use crate::error::{Error, Result};

/// A long-lived thread that can be stopped and waited for
/// ([`crate::Client::shutdown`]); dropping this only stops it, as the
/// detached threads are stopped.
pub(crate) struct Stoppable {
    /// Never sent on: taking and dropping it disconnects the thread's
    /// receiver, which is how it is told to stop.
    stop: parking_lot::Mutex<Option<crossbeam_channel::Sender<()>>>,
    thread: parking_lot::Mutex<Option<thread::JoinHandle<()>>>,
}

impl Stoppable {
    /// Starts `body` on a thread called `name`, which must return once the
    /// receiver it is given is disconnected; when the system gives no
    /// thread, [`Error::Unavailable`] saying it cannot start `what`.
    pub fn spawn(
        name: &str,
        what: &str,
        body: impl FnOnce(crossbeam_channel::Receiver<()>) + Send + 'static,
    ) -> Result<Stoppable> {
        let (stop, stopped) = crossbeam_channel::bounded(0);
        let thread = thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || body(stopped))
            .map_err(|e| Error::Unavailable {
                reason: format!("cannot start {what}: {e}"),
            })?;
        Ok(Stoppable {
            stop: parking_lot::Mutex::new(Some(stop)),
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Tells the thread to stop and waits until it has (its current round
    /// of work, bounded by the response timeout); at once if it had. Never
    /// waits for itself.
    pub fn stop_and_join(&self) {
        drop(self.stop.lock().take());
        join(self.thread.lock().take());
    }
}

/// Waits for `thread` to end, unless it is the calling thread.
pub(crate) fn join(thread: Option<thread::JoinHandle<()>>) {
    if let Some(thread) = thread
        && thread.thread().id() != thread::current().id()
        && thread.join().is_err()
    {
        log::warn!("redisson-lock: a background thread panicked");
    }
}
