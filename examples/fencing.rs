//! How a fenced lock's token lets the protected resource refuse a stale
//! holder: the hazard no lock can prevent on its own (a holder paused past
//! its lease, or a RedLock whose master forgot it), and the fix.
//!
//! ```sh
//! cargo run --example fencing -- redis://127.0.0.1:6379
//! ```
//!
//! Two clients take the same fenced lock in turn. The first is "paused"
//! (think of a long GC pause or a frozen VM) past its lease; Redis expires
//! its lock and the second client takes it with a higher token and writes.
//! When the first wakes up, it still has a guard and tries to write: the
//! storage, which remembers the highest token it accepted, refuses it. The
//! guard also says it is lost, but checking that before writing leaves a
//! window; the token check in the storage does not.

use std::sync::Mutex;
use std::time::Duration;

use redisson_lock::Client;

/// A tiny storage that accepts a write only with a token at least as high
/// as every token it accepted before.
#[derive(Default)]
struct Storage {
    highest: Mutex<u64>,
    value: Mutex<Option<String>>,
}

impl Storage {
    fn write(&self, token: u64, value: &str) -> Result<(), String> {
        let mut highest = self.highest.lock().unwrap_or_else(|e| e.into_inner());
        if token < *highest {
            return Err(format!(
                "refused: token {token} is older than {highest}, a later holder has written"
            ));
        }
        *highest = token;
        *self.value.lock().unwrap_or_else(|e| e.into_inner()) = Some(value.to_owned());
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let first = Client::open(url.as_str())?;
    let second = Client::open(url.as_str())?;
    let storage = Storage::default();
    let name = "fencing-example";
    let lease = Duration::from_millis(300);

    let stale = first.fenced_lock(name).with_lease(lease).lock()?;
    println!("first client holds the lock with token {}", stale.token());
    storage.write(stale.token(), "written by the first client")?;

    // The first client is paused past its lease ...
    std::thread::sleep(lease * 2);
    // ... Redis expired its lock, and the second client takes it.
    let fresh = second.fenced_lock(name).lock()?;
    println!("second client holds the lock with token {}", fresh.token());
    storage.write(fresh.token(), "written by the second client")?;

    // The first client wakes up and, still holding its guard, writes.
    match storage.write(stale.token(), "late write by the first client") {
        Ok(()) => println!("the storage accepted a stale write: this must not happen"),
        Err(refusal) => println!("first client's late write: {refusal}"),
    }
    println!(
        "first guard lost: {} (reason: {:?})",
        stale.is_lost(),
        stale.lost_reason()
    );
    drop(stale);
    fresh.unlock()?;
    let value = storage
        .value
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    println!("stored: {value:?}");
    Ok(())
}
