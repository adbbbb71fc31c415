//! The supervisor's side of a semaphore run (`semaphore.rs` is the
//! workers'): setting the permits, returning a dead worker's permits, the
//! censuses, and the end-of-run accounting and verdict.

use std::sync::atomic::AtomicBool;

use redis::Commands;
use redisson_lock::{Client, Error};

use crate::chaos::Supervisor;
use crate::jvm;
use crate::semaphore::{BARRIER_KEY, CENSUS_WAIT_MS, MOVE, PERMITS, ledger_key, parked_key};
use crate::summary::Stats;
use crate::worker::Book;
use crate::{NAMES, THREADS, instance_of, ms, now_ms};

/// The supervisor's client for the semaphores: sets their permits at the
/// start, returns dead workers' permits, reads the count at the end.
pub fn supervisor_client(url: &str) -> Result<Client, Error> {
    Client::builder(url)
        .connect_timeout(ms(1000))
        .response_timeout(ms(3000))
        .build()
}

pub fn set_up(client: &Client) -> Result<(), Error> {
    for name in NAMES {
        if !client.semaphore(name).try_set_permits(PERMITS as u32)? {
            return Err(Error::UnexpectedReply(format!("{name} already set")));
        }
    }
    Ok(())
}

/// What the supervisor did with dead workers' ledger entries.
#[derive(Default)]
pub struct Reclaims {
    /// Permits of dead holders it returned (definitely taken).
    pub returned: u64,
    /// Dead workers' in-flight acquires and releases moved to `ambiguous`.
    pub in_flight: u64,
    /// Censuses taken, and those that gave up waiting for a thread to park.
    pub censuses: u64,
    pub censuses_skipped: u64,
    /// Ambiguous operations a census resolved, and how many permits they
    /// had taken in all (given back by the census).
    pub resolved: u64,
    pub resolved_taken: u64,
    /// Permits a census could not explain (see `Account::unaccounted`).
    pub unaccounted: u64,
}

/// After a worker died (and after a pause for its last bookkeeping writes
/// already in Redis's socket buffers to be applied): its `pending` and
/// `releasing` tokens become ambiguous, its `held` permits are returned.
pub fn bury(book: &mut Book, client: &Client, instance: &str, reclaims: &mut Reclaims) {
    let never = AtomicBool::new(false);
    std::thread::sleep(ms(100));
    for name in NAMES {
        let ambiguous = ledger_key("ambiguous", name);
        for (set, what) in [("pending", "acq"), ("releasing", "rel"), ("held", "")] {
            let key = ledger_key(set, name);
            let members: Vec<String> = book
                .retry(&never, |con| con.smembers(&key))
                .unwrap_or_default();
            for token in members.iter().filter(|t| instance_of(t) == instance) {
                if what.is_empty() {
                    // Out of the ledger first: a release whose reply is lost
                    // is then recorded as an ambiguous release.
                    let releasing = ledger_key("releasing", name);
                    book.retry(&never, |con| {
                        MOVE.key(&key)
                            .key(&releasing)
                            .arg(token)
                            .arg(token)
                            .invoke::<i64>(con)
                    });
                    let outcome = reclaim(client, name);
                    let target = if outcome { None } else { Some(&ambiguous) };
                    book.retry(&never, |con| match target {
                        None => con.srem::<_, _, ()>(&releasing, token),
                        Some(ambiguous) => MOVE
                            .key(&releasing)
                            .key(ambiguous)
                            .arg(token)
                            .arg(format!("rel {token}"))
                            .invoke::<()>(con),
                    });
                    reclaims.returned += 1;
                } else {
                    let entry = format!("{what} {token}");
                    book.retry(&never, |con| {
                        MOVE.key(&key)
                            .key(&ambiguous)
                            .arg(token)
                            .arg(&entry)
                            .invoke::<i64>(con)
                    });
                    reclaims.in_flight += 1;
                }
            }
        }
    }
}

/// Returns one permit of a dead holder: `true` once released, `false` when
/// the reply was lost (ambiguous). Definite failures are retried.
fn reclaim(client: &Client, name: &str) -> bool {
    loop {
        match client.semaphore(name).release(1) {
            Ok(()) => return true,
            Err(Error::OutcomeUnknown { .. }) => return false,
            Err(e) => {
                eprintln!("torture: returning a dead holder's permit of {name}: {e}");
                std::thread::sleep(ms(100));
            }
        }
    }
}

/// The end-of-run accounting of one semaphore, once every worker stopped.
#[derive(Default, Debug)]
pub struct Account {
    pub available: i64,
    /// Permits the ledger says are still taken (a release that kept failing).
    pub held: u64,
    /// In-flight entries left (none once every worker stopped: a worker
    /// killed for hanging is not buried).
    pub in_flight: u64,
    pub ambiguous_acquires: u64,
    pub ambiguous_releases: u64,
}

impl Account {
    /// Permits missing beyond those the ledger says are taken: each
    /// ambiguous acquire or release (and in-flight entry left, if any) took
    /// 0 or 1, so this must be within `0..=ambiguous()`.
    pub fn missing(&self) -> i64 {
        PERMITS as i64 - self.available - self.held as i64
    }

    pub fn ambiguous(&self) -> u64 {
        self.ambiguous_acquires + self.ambiguous_releases + self.in_flight
    }

    pub fn unaccounted(&self) -> u64 {
        let missing = self.missing();
        if missing < 0 {
            missing.unsigned_abs()
        } else {
            (missing as u64).saturating_sub(self.ambiguous())
        }
    }
}

pub fn account(book: &mut Book, client: &Client, name: &str) -> Account {
    let never = AtomicBool::new(false);
    let available = loop {
        match client.semaphore(name).available_permits() {
            Ok(n) => break n,
            Err(e) => {
                eprintln!("torture: available_permits of {name}: {e}");
                std::thread::sleep(ms(200));
            }
        }
    };
    let mut count = |set: &str| {
        let key = ledger_key(set, name);
        book.retry(&never, |con| con.scard::<_, u64>(&key))
            .unwrap_or(0)
    };
    let held = count("held");
    let in_flight = count("pending") + count("releasing");
    let entries: Vec<String> = book
        .retry(&never, |con| con.smembers(ledger_key("ambiguous", name)))
        .unwrap_or_default();
    let ambiguous_acquires = entries.iter().filter(|e| e.starts_with("acq ")).count() as u64;
    Account {
        available,
        held,
        in_flight,
        ambiguous_acquires,
        ambiguous_releases: entries.len() as u64 - ambiguous_acquires,
    }
}

/// The semaphore run's verdict once every worker stopped: (failures, the
/// failure columns, the information columns) of the summary line.
///
/// - `over_n` (failure): sections that saw more than `PERMITS` live holders.
/// - `permits_unaccounted` (failure): per semaphore, permits the ledger
///   cannot explain: `PERMITS - available - held` outside
///   `0..=ambiguous` (below 0: permits created; above: permits lost).
/// - `stuck` (failure): threads of the last workers that did not complete
///   their final acquire and release within `FINAL_ROUND_MS`.
pub fn verdict(sup: &mut Supervisor, stats: &Stats) -> (u64, String, String) {
    for line in &stats.over_n {
        eprintln!("torture: MORE THAN {PERMITS} HOLDERS on {line}");
    }
    for line in &stats.final_failed {
        eprintln!("torture: FINAL ROUND FAILED on {line}");
    }
    let mut stuck = 0;
    let java = sup.java_jar.is_some();
    let finals = sup
        .workers
        .iter()
        .map(|worker| (worker.instance.as_str(), THREADS))
        .chain(java.then_some((jvm::JAVA_INSTANCE, jvm::JAVA_ACTORS)));
    for (instance, threads) in finals {
        let done = stats.final_ok.get(instance).copied().unwrap_or(0);
        stuck += (threads as u64).saturating_sub(done);
    }
    let mut unaccounted = 0;
    let (mut available, mut held, mut ambiguous, mut missing) = (0, 0, 0, 0);
    let client = sup.sem.clone().expect("a semaphore run's client");
    for name in NAMES {
        let account = account(&mut sup.redis, &client, name);
        if account.unaccounted() > 0 || std::env::var_os("TORTURE_DEBUG").is_some() {
            eprintln!(
                "torture: {}PERMITS OF {name}: {account:?}, missing {} (allowed 0..={})",
                if account.unaccounted() > 0 {
                    "UNACCOUNTED "
                } else {
                    ""
                },
                account.missing(),
                account.ambiguous()
            );
        }
        unaccounted += account.unaccounted();
        available += account.available;
        held += account.held;
        ambiguous += account.ambiguous();
        missing += account.missing();
    }
    // A census that gave up: a thread did not come back to the top of its
    // loop within CENSUS_WAIT_MS, though every wait is bounded (3 s).
    stuck += sup.reclaims.censuses_skipped;
    unaccounted += sup.reclaims.unaccounted;
    let over_n = stats.over_n.len() as u64;
    let failures = over_n + unaccounted + stuck;
    let failure_columns =
        format!(" over_n={over_n} permits_unaccounted={unaccounted} stuck={stuck}");
    let info = format!(
        ", permits={PERMITS}x{}, available_end={available}, held_end={held}, \
         returned_dead_permits={}, dead_in_flight={}, unknown_acquires={}, unknown_releases={}, \
         censuses={}, censuses_skipped={}, ambiguous={}, ambiguous_taken={}, final_rounds={}, worst_final_round={}ms, java={}",
        NAMES.len(),
        sup.reclaims.returned,
        sup.reclaims.in_flight,
        stats.unknown_acquires,
        stats.unknown_releases,
        sup.reclaims.censuses,
        sup.reclaims.censuses_skipped,
        sup.reclaims.resolved + ambiguous,
        sup.reclaims.resolved_taken as i64 + missing,
        stats.final_ok.values().sum::<u64>(),
        stats.final_worst_ms,
        if java {
            format!("{}actors/{}sections", jvm::JAVA_ACTORS, stats.java_sections)
        } else {
            "none".to_owned()
        },
    );
    (failures, failure_columns, info)
}

/// A census, between chaos actions: every live thread (Rust and Java)
/// parks at the top of its loop, holding nothing, with nothing in flight.
/// Then, per semaphore, `PERMITS - available - held` is exactly what the
/// ambiguous operations since the last census took: it must be within
/// `0..=ambiguous` (else `unaccounted`), and it is given back, so that lost
/// replies do not drain the semaphores. Returns whether it was taken. Its
/// time is not counted in stall gaps (it is recorded with the pauses).
pub fn census(sup: &mut Supervisor, id: u64) -> bool {
    let never = AtomicBool::new(false);
    let started = now_ms();
    let id = id.to_string();
    let parked = parked_key(&id);
    sup.redis
        .retry(&never, |con| con.set::<_, _, ()>(BARRIER_KEY, &id));
    let mut live: Vec<String> = sup
        .workers
        .iter()
        .flat_map(|w| (0..THREADS).map(move |i| format!("{}/{i}", w.instance)))
        .collect();
    if sup.java.is_some() {
        live.extend((0..jvm::JAVA_ACTORS).map(|a| format!("{}/a{a}", jvm::JAVA_INSTANCE)));
    }
    let deadline = now_ms() + CENSUS_WAIT_MS;
    let all_parked = loop {
        let members: Vec<String> = sup
            .redis
            .retry(&never, |con| con.smembers(&parked))
            .unwrap_or_default();
        let missing = live.iter().filter(|t| !members.contains(t)).count();
        if missing == 0 {
            break true;
        }
        if now_ms() > deadline {
            eprintln!(
                "torture: census {id}: {missing} threads did not park within {CENSUS_WAIT_MS} ms"
            );
            break false;
        }
        // Workers that die meanwhile are buried and replaced; their
        // successors park too.
        let _ = sup.idle(ms(20));
        live.retain(|t| !sup.dead_at.contains_key(instance_of(t)));
        for w in &sup.workers {
            for i in 0..THREADS {
                let t = format!("{}/{i}", w.instance);
                if !live.contains(&t) {
                    live.push(t);
                }
            }
        }
    };
    if all_parked {
        let client = sup.sem.clone().expect("a semaphore run's client");
        for name in NAMES {
            let account = account(&mut sup.redis, &client, name);
            let missing = account.missing();
            if account.unaccounted() > 0 {
                eprintln!(
                    "torture: census {id}: UNACCOUNTED PERMITS OF {name}: {account:?}, missing {missing} (allowed 0..={})",
                    account.ambiguous()
                );
                sup.reclaims.unaccounted += account.unaccounted();
            }
            if missing < 0 {
                // Permits created: take the extra ones away again, so that
                // they are not counted again at the next census.
                let extra = u32::try_from(-missing).unwrap_or(u32::MAX);
                if let Ok(Some(permits)) = client.semaphore(name).try_acquire(extra) {
                    permits.forget();
                }
            }
            for _ in 0..missing.max(0) {
                if !reclaim(&client, name) {
                    eprintln!("torture: census {id}: giving a permit of {name} back: reply lost");
                }
            }
            sup.reclaims.resolved += account.ambiguous();
            sup.reclaims.resolved_taken += missing.max(0) as u64;
            let key = ledger_key("ambiguous", name);
            sup.redis.retry(&never, |con| con.del::<_, ()>(&key));
        }
        sup.reclaims.censuses += 1;
        // Nobody acquires while parked: not a stall (see `paused_within`).
        sup.pauses.push((started, now_ms(), false));
    } else {
        sup.reclaims.censuses_skipped += 1;
    }
    sup.redis.retry(&never, |con| {
        redis::pipe().del(BARRIER_KEY).del(&parked).query::<()>(con)
    });
    all_parked
}
