//! A leader that fences its writes with its term: campaigns in an election
//! (`Client::leader_election`), and while it leads appends to a log in Redis
//! through a script that refuses any term lower than the highest it has
//! seen, so a deposed leader that was paused past its lease cannot write
//! after its successor did.
//!
//! ```text
//! cargo run --example leader -- redis://127.0.0.1:6379/ scheduler 30000
//! ```
//!
//! Arguments: the Redis URL, the election's name and the watchdog timeout in
//! ms. It prints `LEADER <term> <owner field>` once elected, then writes one
//! log entry every 100 ms (`WROTE <term>` or `REFUSED <term>`) until a line
//! `resign` on stdin (`RESIGNED`), the end of input, or the leadership is
//! lost (`LOST <reason>`). The tests of `tests/election.rs` run it as a
//! candidate process.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::Duration;

use redisson_lock::Client;

/// Appends `ARGV[2]` to the list `KEYS[2]` if the term `ARGV[1]` is at
/// least the highest term `KEYS[1]` has seen: the fenced resource.
const FENCED_APPEND: &str = r"
local seen = tonumber(redis.call('get', KEYS[1]) or '0')
local term = tonumber(ARGV[1])
if term < seen then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call('rpush', KEYS[2], ARGV[2])
return 1
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: leader <redis url> <election name> <watchdog timeout ms>";
    let url = args.next().ok_or(usage)?;
    let name = args.next().ok_or(usage)?;
    let watchdog_ms: u64 = args.next().ok_or(usage)?.parse()?;
    let client = Client::builder(url.as_str())
        .watchdog_timeout(Duration::from_millis(watchdog_ms))
        .build()?;
    let leadership = client.leader_election(name.as_str()).campaign()?;
    let term = leadership.term();
    println!("LEADER {term} {}", leadership.owner_field());

    // stdin on its own thread: `resign`, or its end.
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if lines_tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let redis = redis::Client::open(url.as_str())?;
    let mut con = redis.get_connection()?;
    let lost = leadership.lost_signal().receiver();
    let fenced = redis::Script::new(FENCED_APPEND);
    loop {
        if let Ok(reason) = lost.try_recv() {
            println!("LOST {reason:?}");
            return Ok(());
        }
        let wrote: i64 = fenced
            .key(format!("{name}:highest-term"))
            .key(format!("{name}:log"))
            .arg(term)
            .arg(format!("written under term {term}"))
            .invoke(&mut con)?;
        println!("{} {term}", if wrote == 1 { "WROTE" } else { "REFUSED" });
        std::io::stdout().flush()?;
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.trim() == "resign" => {
                leadership.resign()?;
                println!("RESIGNED");
                return Ok(());
            }
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}
