//! The bookkeeping connection (`Book`) that the workers' sections, the
//! supervisor and its census use for the torture's own keys (occupancy and
//! waiting sets, counters, dead marks, the semaphore ledger): a plain
//! redis connection, retried through every chaos action.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use crate::ms;

/// A plain connection for the bookkeeping around critical sections, with a
/// read timeout longer than any chaos pause, reconnecting after kills.
pub struct Book {
    client: redis::Client,
    con: Option<redis::Connection>,
}

impl Book {
    pub fn new(url: &str) -> Book {
        Book {
            client: redis::Client::open(url).expect("a valid url"),
            con: None,
        }
    }

    /// Runs `op` until it succeeds; `None` only when the worker is stopping
    /// and Redis keeps failing.
    pub fn retry<T>(
        &mut self,
        stop: &AtomicBool,
        mut op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        let mut failures = 0u32;
        loop {
            let result = match self.con.as_mut() {
                Some(con) => op(con),
                None => match self.client.get_connection_with_timeout(ms(2000)) {
                    Ok(con) => {
                        let _ = con.set_read_timeout(Some(Duration::from_secs(30)));
                        let _ = con.set_write_timeout(Some(Duration::from_secs(30)));
                        self.con = Some(con);
                        continue;
                    }
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok(value) => return Some(value),
                Err(_) => {
                    self.con = None;
                    failures += 1;
                    if stop.load(Ordering::Acquire) && failures >= 20 {
                        return None;
                    }
                    thread::sleep(ms(u64::from(failures.min(10)) * 20));
                }
            }
        }
    }
}
