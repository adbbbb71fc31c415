//! `run --hand-off` and `$REDISSON_LOCK_HOLD` (issue 33, item 3): the job's
//! lock handed to another process, which adopts it (`Lock::adopt`), renews
//! it past the wrapper's lease and releases it; without `--hand-off` the
//! wrapper releases at the end and the token is stale.

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::thread;
use std::time::Duration;

use common::{Tmp, bin};
use redisson_lock::{Client, Error, HoldToken};
use support::RedisServer;

fn token_of_a_run(server: &RedisServer, tmp: &Tmp, name: &str, hand_off: bool) -> HoldToken {
    let file = tmp.path(name);
    let mut args = vec!["run", "--watchdog-timeout", "1s"];
    if hand_off {
        args.push("--hand-off");
    }
    let script = format!("printf '%s' \"$REDISSON_LOCK_HOLD\" > {file}");
    args.extend([name, "--", "sh", "-c", &script]);
    let status = bin(&server.url()).args(&args).status().expect("run");
    assert_eq!(status.code(), Some(0));
    std::fs::read_to_string(&file)
        .expect("the job wrote the token")
        .parse()
        .expect("a hold token")
}

#[test]
fn a_handed_off_lock_is_adopted_renewed_and_released_by_another_process() {
    let server = RedisServer::start();
    let tmp = Tmp::new("hand-off");
    let token = token_of_a_run(&server, &tmp, "handed", true);
    assert_eq!(token.name(), "handed");
    // The wrapper is gone; its lock is not, for one lease.
    let pttl: i64 = server.cmd(&["PTTL", "handed"]);
    assert!(pttl > 0 && pttl <= 1000, "PTTL {pttl}");
    let adopter = Client::builder(server.url())
        .watchdog_timeout(Duration::from_secs(1))
        .build()
        .expect("adopter");
    let guard = adopter.lock("handed").adopt(&token).expect("adopt");
    thread::sleep(Duration::from_millis(2500)); // past two leases
    assert!(!guard.is_lost());
    let rival = Client::open(server.url()).expect("rival");
    assert!(rival.lock("handed").try_lock().expect("try_lock").is_none());
    guard.unlock().expect("the adopter's release");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "handed"]), 0);

    // Without --hand-off the wrapper released it: the token is stale.
    let stale = token_of_a_run(&server, &tmp, "released", false);
    assert_eq!(server.cmd::<i64>(&["EXISTS", "released"]), 0);
    assert!(matches!(
        adopter.lock("released").adopt(&stale),
        Err(Error::NotHeld { .. })
    ));
}
