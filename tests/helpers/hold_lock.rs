//! **A test helper, not an example** (built as the `hold_lock` example
//! target, see Cargo.toml, so that `tests/support`'s `example_binary` can
//! build it): holds one lock until told to let go. The child process of the
//! fault-injection tests (`tests/faults_stall.rs`), which freeze it with
//! SIGSTOP to play a holder that stalls past its lease; also a tiny process
//! to experiment with.
//!
//! ```text
//! cargo run --example hold_lock -- redis://127.0.0.1:6379/ orders 30000
//! ```
//!
//! Arguments: the Redis URL, the lock name, and the watchdog timeout in ms;
//! with a fourth, `detach`, it takes an owned hold, detaches it, prints
//! `TOKEN <hold token>` and exits, leaving the lock held for another process
//! to adopt (`tests/java_interop_owned.rs`).
//! It takes the lock (waiting as long as it takes), prints `HELD <owner field>`
//! and then reads commands from stdin, one per line:
//!
//! - `lost`: prints `LOST <true|false>`, whether the guard knows it lost the lock;
//! - `unlock`: releases the lock and prints `UNLOCK lost=<bool> ok` or
//!   `UNLOCK lost=<bool> err <error>`, then exits.
//!
//! End of input releases the lock (by dropping the guard) and exits.

use std::io::{BufRead, Write};
use std::time::Duration;

use redisson_lock::Client;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: hold_lock <redis url> <lock name> <watchdog timeout ms>";
    let url = args.next().ok_or(usage)?;
    let name = args.next().ok_or(usage)?;
    let watchdog_ms: u64 = args.next().ok_or(usage)?.parse()?;

    let client = Client::builder(url.as_str())
        .watchdog_timeout(Duration::from_millis(watchdog_ms))
        .response_timeout(Duration::from_millis(500))
        .build()?;
    let lock = client.lock(name);
    if args.next().as_deref() == Some("detach") {
        let token = lock.lock_owned()?.detach();
        println!("TOKEN {token}");
        return Ok(());
    }
    let guard = lock.lock()?;

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "HELD {}", client.owner_field())?;
    out.flush()?;

    for line in std::io::stdin().lock().lines() {
        match line?.trim() {
            "lost" => writeln!(out, "LOST {}", guard.is_lost())?,
            "unlock" => {
                let lost = guard.is_lost();
                match guard.unlock() {
                    Ok(()) => writeln!(out, "UNLOCK lost={lost} ok")?,
                    Err(e) => writeln!(out, "UNLOCK lost={lost} err {e:?}")?,
                }
                out.flush()?;
                return Ok(());
            }
            other => writeln!(out, "unknown command {other:?}")?,
        }
        out.flush()?;
    }
    Ok(())
}
