//! **A test helper, not an example** (built as the `multilock_worker`
//! example target, see Cargo.toml, so that `tests/support`'s
//! `example_binary` can build it): takes a MultiLock over the same name on
//! several servers, many times, and checks that no other process is inside
//! at the same moment. The child process of `tests/multilock.rs`'s
//! two-process exclusion test; it can also be run by hand against servers
//! of your own.
//!
//! ```text
//! cargo run --example multilock_worker -- redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 orders 200
//! ```
//!
//! Arguments: the servers' URLs (comma-separated), the lock name, and the
//! number of rounds. Each round takes the MultiLock, `INCR`s the counter
//! `<name>:inside` on the first server (a result other than 1 means someone
//! else was inside: an overlap), holds for about a millisecond, `DECR`s it
//! and unlocks; `<name>:rounds` counts the rounds of every worker. Prints
//! `DONE rounds=<n> overlaps=<n>` at the end.

use std::time::Duration;

use redis::Commands;
use redisson_lock::{Client, MultiLock};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: multilock_worker <url,url,...> <lock name> <rounds>";
    let urls = args.next().ok_or(usage)?;
    let name = args.next().ok_or(usage)?;
    let rounds: u64 = args.next().ok_or(usage)?.parse()?;
    let urls: Vec<&str> = urls.split(',').collect();
    let clients = urls
        .iter()
        .map(|url| Client::open(*url))
        .collect::<redisson_lock::Result<Vec<_>>>()?;
    let multi = MultiLock::new(clients.iter().map(|client| client.lock(&name)));
    let mut counter = redis::Client::open(urls[0])?.get_connection()?;
    let (inside, total) = (format!("{name}:inside"), format!("{name}:rounds"));
    let mut overlaps = 0;
    for _ in 0..rounds {
        let guard = multi.lock()?;
        let now: i64 = counter.incr(&inside, 1)?;
        if now != 1 {
            overlaps += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
        let _: i64 = counter.decr(&inside, 1)?;
        let _: i64 = counter.incr(&total, 1)?;
        guard.unlock()?;
    }
    println!("DONE rounds={rounds} overlaps={overlaps}");
    Ok(())
}
