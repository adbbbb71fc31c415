//! The run's history (`--history <file>`, always on with `--kind fenced`):
//! one line per event, from every worker (Rust threads and Java actors) and
//! from the supervisor (faults, processes), read back by the checker
//! (`checker.rs`; the reading itself in `checker/read.rs`).
//!
//! A line is `<t> <who> <op> <phase> key=value...`, where `<t>` is the
//! machine's realtime clock in ns (`CLOCK_REALTIME`: Rust's `SystemTime`,
//! Java's `Instant.now()`, same clock since every process runs on this
//! machine), `<who>` a Rust thread (`w<slot>g<generation>/<thread>`), a Java
//! actor (`j<slot>g<generation>/a<actor>`) or `sup`. Workers print their
//! lines on stdout prefixed with `H ` (one `write` per line, so a SIGKILL
//! never leaves half of one); the supervisor's readers append them to the
//! file as they come, so the file is in arrival order, not time order.
//!
//! What a worker records, per attempt `h` (a number unique per `<who>`):
//!
//! - `acquire invoke lock=<name> h=<n> mode=<w|r> call=<lock|try|tryfor|lease>`
//!   just before the call; then one of `acquire ok ... tok=<token>
//!   vu=<valid until, ns>` (right after it returned), `acquire fail`
//!   (definitely not acquired: a try that found the lock taken) or
//!   `acquire info ... err=<kind>` (an error: maybe acquired, maybe not).
//!   `reentry=1` on a second hold of the same thread (its `h` is `<n>r`).
//! - `hold invoke` / `hold ok ... vu=<ns> lost=<0|reason>`: the critical
//!   section (`tok` on both).
//! - `valid update ... vu=<ns>`: a long hold's deadline moved (renewals).
//! - `release invoke ... vu=<ns> lost=<0|reason>` just before the unlock,
//!   then `release ok`, `release fail ... err=<lost|not_held>` or
//!   `release info ... err=<kind>`.
//! - `lost signal ... reason=<reason> since=<ns>`: the hold's lost signal
//!   fired (Rust: the guard's `LostSignal`, seen by a watcher thread; Java:
//!   the actor's own check, see `FencedOps.java`); `since` is when it came
//!   into force: the deadline that passed for `lease_expired`, else when it
//!   was seen.
//!
//! `vu` is the guard's `valid_until()` (Rust: the send time of the last
//! renewal or acquisition that succeeded plus its lease; Java: the acquire's
//! invoke time plus its lease, which Redisson does not let a caller see move).
//!
//! The supervisor records `process start|ready|exit target=<instance> ...`
//! and `fault invoke|ok <type> ...` (a SIGKILL's `ok` once the process is
//! reaped; a SIGSTOP's at its SIGCONT).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The realtime clock in ns since the epoch.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A monotonic `Instant` on the realtime clock (ns), by its distance from
/// now.
pub fn wall_ns(at: Instant) -> u64 {
    let (mono, wall) = (Instant::now(), now_ns());
    if at >= mono {
        wall.saturating_add(u64::try_from((at - mono).as_nanos()).unwrap_or(u64::MAX))
    } else {
        wall.saturating_sub(u64::try_from((mono - at).as_nanos()).unwrap_or(u64::MAX))
    }
}

/// The history file, shared by the supervisor's threads.
#[derive(Clone)]
pub struct History(Arc<Mutex<BufWriter<File>>>);

impl History {
    pub fn create(path: &Path) -> std::io::Result<History> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        Ok(History(Arc::new(Mutex::new(BufWriter::with_capacity(
            1 << 20,
            File::create(path)?,
        )))))
    }

    /// Appends one worker line (without its `H ` prefix).
    pub fn line(&self, line: &str) {
        let mut out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = out.write_all(line.as_bytes());
        let _ = out.write_all(b"\n");
    }

    /// Appends one supervisor event, stamped now.
    pub fn sup(&self, event: std::fmt::Arguments<'_>) {
        self.line(&format!("{} sup {event}", now_ns()));
    }

    pub fn flush(&self) {
        let _ = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush();
    }
}

/// Records a supervisor event when the run keeps a history.
pub fn sup_event(history: Option<&History>, event: std::fmt::Arguments<'_>) {
    if let Some(history) = history {
        history.sup(event);
    }
}
