//! [`RustThread`]: a Rust thread that keeps its guards (which cannot leave
//! it) between the steps of a test, the counterpart of a Java driver actor.
//! Guards of any lock type are kept, type-erased, until the test clears them.

use std::any::Any;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The guards a [`RustThread`] holds, of any lock type.
pub type Held = Vec<Box<dyn Any>>;

type Job = Box<dyn FnOnce(&mut Held) + Send>;

/// A thread running the jobs a test sends it, in order.
pub struct RustThread {
    jobs: mpsc::Sender<Job>,
}

impl RustThread {
    pub fn spawn(name: &str) -> RustThread {
        let (jobs, queue) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let mut held = Held::new();
                for job in queue {
                    job(&mut held);
                }
            })
            .expect("spawn");
        RustThread { jobs }
    }

    /// Runs `f` on the thread; its result arrives on the returned channel.
    pub fn start<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Held) -> R + Send + 'static,
    ) -> mpsc::Receiver<R> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Box::new(move |held| {
                let _ = tx.send(f(held));
            }))
            .expect("the Rust thread is gone");
        rx
    }

    /// Runs `f` on the thread and waits for its result.
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce(&mut Held) -> R + Send + 'static) -> R {
        self.start(f)
            .recv_timeout(Duration::from_secs(60))
            .expect("the Rust thread panicked or hung")
    }
}
