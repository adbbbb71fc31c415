//! MultiLock and RedLock over five independent redis-servers, one client per
//! server: majorities with servers killed, frozen and restarted, validity,
//! exclusion, unlock of every member.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Lock, MultiLock, RedLock};
use support::state::pttl;
use support::{RedisServer, eventually};

struct Masters {
    servers: Vec<RedisServer>,
}

impl Masters {
    fn start() -> Masters {
        Masters {
            servers: (0..5).map(|_| RedisServer::start()).collect(),
        }
    }

    /// One client per master; a short response timeout bounds what a frozen
    /// master costs an acquire.
    fn clients(&self) -> Vec<Client> {
        self.clients_with_watchdog(redisson_lock::DEFAULT_WATCHDOG_TIMEOUT)
    }

    fn clients_with_watchdog(&self, watchdog: Duration) -> Vec<Client> {
        self.clients_with(watchdog, Duration::from_millis(200))
    }

    fn clients_with_timeout(&self, response_timeout: Duration) -> Vec<Client> {
        self.clients_with(redisson_lock::DEFAULT_WATCHDOG_TIMEOUT, response_timeout)
    }

    fn clients_with(&self, watchdog: Duration, response_timeout: Duration) -> Vec<Client> {
        self.servers
            .iter()
            .map(|server| {
                Client::builder(server.url())
                    .watchdog_timeout(watchdog)
                    .response_timeout(response_timeout)
                    .connect_timeout(Duration::from_millis(500))
                    .build()
                    .expect("client")
            })
            .collect()
    }

    fn holders(&self, name: &str) -> usize {
        self.servers
            .iter()
            .filter(|server| server.cmd::<bool>(&["EXISTS", name]))
            .count()
    }
}

fn members(clients: &[Client], name: &str) -> Vec<Lock> {
    clients.iter().map(|client| client.lock(name)).collect()
}

#[test]
fn redlock_takes_a_majority_with_two_masters_killed() {
    let mut masters = Masters::start();
    let clients = masters.clients();
    masters.servers[1].stop();
    masters.servers[3].stop();
    let redlock = RedLock::new(members(&clients, "quorum"));
    assert_eq!(redlock.quorum(), 3);
    let guard = redlock
        .try_lock_for(Duration::from_secs(3))
        .expect("try_lock_for")
        .expect("a majority of live masters");
    assert_eq!(guard.guards().len(), 3);
    assert!(!guard.is_lost());
    assert!(
        guard.validity() > Duration::from_secs(25),
        "{:?}",
        guard.validity()
    );
    guard.unlock().expect("unlock");
}

#[test]
fn redlock_gives_up_within_its_budget_with_three_masters_killed() {
    let mut masters = Masters::start();
    let clients = masters.clients();
    for i in [0, 2, 4] {
        masters.servers[i].stop();
    }
    let redlock = RedLock::new(members(&clients, "minority"));
    let budget = Duration::from_millis(800);
    let started = Instant::now();
    let got = redlock.try_lock_for(budget).expect("try_lock_for");
    let took = started.elapsed();
    assert!(got.is_none(), "acquired without a majority");
    assert!(
        took < budget + Duration::from_secs(1),
        "gave up after {took:?}"
    );
    // The two live members it took were released (in the background).
    assert!(eventually(Duration::from_secs(3), || masters.servers[1]
        .cmd::<i64>(&["DBSIZE"])
        + masters.servers[3].cmd::<i64>(&["DBSIZE"])
        == 0));
}

#[test]
fn a_frozen_master_costs_an_acquire_no_more_than_its_share_of_the_wait() {
    let masters = Masters::start();
    // A response timeout far longer than the share: only the share may
    // bound the frozen member's reply.
    let clients = masters.clients_with_timeout(Duration::from_secs(10));
    masters.servers[2].pause();
    let redlock = RedLock::new(members(&clients, "frozen"));
    let budget = Duration::from_millis(1500);
    let started = Instant::now();
    let got = redlock.try_lock_for(budget).expect("try_lock_for");
    let took = started.elapsed();
    masters.servers[2].resume();
    let guard = got.expect("a majority despite the frozen master");
    // Its share is budget / 5 = 300 ms.
    assert!(took < Duration::from_millis(900), "took {took:?}");
    assert!(took >= Duration::from_millis(290), "took {took:?}");
    assert_eq!(guard.guards().len(), 4);
    guard.unlock().expect("unlock");
    // The frozen member may have been taken once it thawed: it is released
    // in the background.
    assert!(eventually(Duration::from_secs(3), || masters
        .holders("frozen")
        == 0));
}

#[test]
fn a_frozen_master_costs_the_ordered_attempt_no_more_than_its_share_either() {
    // The first attempt (every member at once) falls short because another
    // client holds members 0 and 1; the ordered attempt that follows waits
    // for them (their lease runs out meanwhile) and must not wait for the
    // frozen member longer than its share either.
    let masters = Masters::start();
    let clients = masters.clients_with_timeout(Duration::from_secs(10));
    let other = masters.clients();
    let blockers: Vec<_> = other[..2]
        .iter()
        .map(|client| {
            client
                .lock("frozen-ordered")
                .with_lease(Duration::from_millis(150))
                .lock()
                .expect("blocker")
        })
        .collect();
    masters.servers[4].pause();
    let redlock = RedLock::new(members(&clients, "frozen-ordered"));
    let budget = Duration::from_millis(2500);
    let started = Instant::now();
    let got = redlock.try_lock_for(budget).expect("try_lock_for");
    let took = started.elapsed();
    masters.servers[4].resume();
    drop(blockers); // long expired
    let guard = got.expect("a majority despite the frozen master");
    // Without the bound, the frozen member's reply alone would take the
    // 10 s response timeout; with it, each attempt pays its share
    // (500 ms at most).
    assert!(took < Duration::from_millis(2000), "took {took:?}");
    assert!(guard.guards().len() >= 3);
    guard.unlock().expect("unlock");
    assert!(eventually(Duration::from_secs(3), || masters
        .holders("frozen-ordered")
        == 0));
}

#[test]
fn multilocks_of_two_processes_exclude_each_other() {
    let masters = Masters::start();
    let urls: Vec<String> = masters.servers[..3].iter().map(|s| s.url()).collect();
    let urls = urls.join(",");
    let binary = support::example_binary("multilock_worker");
    let rounds = 60;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&binary)
                .args([urls.as_str(), "two-procs", &rounds.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("start a worker")
        })
        .collect();
    for worker in workers {
        let out = worker.wait_with_output().expect("worker");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "worker failed: {stdout}");
        assert!(
            stdout.contains(&format!("DONE rounds={rounds} overlaps=0")),
            "{stdout}"
        );
    }
    let total: i64 = masters.servers[0].cmd(&["GET", "two-procs:rounds"]);
    assert_eq!(total, 2 * rounds);
    assert_eq!(masters.holders("two-procs"), 0);
}

#[test]
fn a_master_restarted_without_persistence_lets_another_client_win_a_majority() {
    // RedLock's known weakness: a master that forgets the lock (a restart
    // without persistence, or a failover before replication) counts for the
    // next client too. The first client holds a bare majority (two masters
    // were down); one of its three restarts empty, the two others come back:
    // a second client now wins a majority of its own, and the first still
    // believes it holds the lock until its next renewal finds the member
    // gone. Only a fencing token checked by the resource refuses the stale
    // holder (examples/fencing.rs).
    let mut masters = Masters::start();
    let first = masters.clients_with_watchdog(Duration::from_secs(6));
    let second = masters.clients();
    masters.servers[3].stop();
    masters.servers[4].stop();
    let held = RedLock::new(members(&first, "forgotten"))
        .try_lock_for(Duration::from_secs(2))
        .expect("try_lock_for")
        .expect("a bare majority");
    assert_eq!(held.guards().len(), 3);
    masters.servers[3].restart();
    masters.servers[4].restart();
    masters.servers[2].restart(); // forgets the first client's member
    let rival = RedLock::new(members(&second, "forgotten"))
        .try_lock_for(Duration::from_secs(2))
        .expect("rival try_lock_for")
        .expect("the rival wins masters 2, 3 and 4: a majority");
    assert_eq!(rival.guards().len(), 3);
    assert!(
        !held.is_lost(),
        "the hazard: both believe they hold the lock (until the next renewal)"
    );
    // The first client's watchdog finds its member on master 2 gone: 2 of 5
    // left, no majority, and its guard says so.
    assert!(eventually(Duration::from_secs(5), || held.is_lost()));
    rival.unlock().expect("rival unlock");
    let _ = held.unlock();
}

#[test]
fn multilock_needs_every_member_and_releases_what_it_took() {
    let masters = Masters::start();
    let clients = masters.clients();
    let other = masters.clients();
    let blocker = other[3].lock("all").lock().expect("blocker");
    let multi = MultiLock::new(members(&clients, "all"));
    assert!(multi.try_lock().expect("try_lock").is_none());
    // The members taken before the blocked one were released.
    assert!(eventually(Duration::from_secs(3), || masters
        .holders("all")
        == 1));
    drop(blocker);
    let guard = multi.lock().expect("lock");
    assert_eq!(masters.holders("all"), 5);
    guard.unlock().expect("unlock");
    assert_eq!(masters.holders("all"), 0);
}

#[test]
fn an_attempt_right_after_a_failed_one_keeps_every_member_it_takes() {
    // A failed attempt releases what it took on a background thread, with
    // the same owner field as this thread's next attempt: that release must
    // not remove a member the next attempt takes again.
    let masters = Masters::start();
    let clients = masters.clients();
    let other = masters.clients();
    let multi = MultiLock::new(members(&clients, "again"));
    for round in 0..30 {
        let blocker = other[4].lock("again").lock().expect("blocker");
        assert!(multi.try_lock().expect("try_lock").is_none());
        drop(blocker);
        // Again at once, as a caller looping on try_lock() would.
        let started = Instant::now();
        let guard = loop {
            if let Some(guard) = multi.try_lock().expect("try_lock") {
                break guard;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "never taken");
        };
        // Long enough for any background release to have landed.
        thread::sleep(Duration::from_millis(30));
        assert_eq!(
            masters.holders("again"),
            5,
            "round {round}: a member vanished"
        );
        guard.unlock().expect("unlock");
    }
}

#[test]
fn members_on_one_client_with_a_one_connection_pool_take_turns() {
    // Every member's command is written on its own connection: a member
    // that finds the pool busy (held by the members before it) waits for
    // their replies instead of for a connection that cannot come back.
    let masters = Masters::start();
    let client = Client::builder(masters.servers[0].url())
        .pool_size(1)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let multi = MultiLock::new(["a", "b", "c"].map(|name| client.lock(name)));
    let started = Instant::now();
    let guard = multi
        .try_lock_for(Duration::from_secs(1))
        .expect("try_lock_for")
        .expect("free members");
    assert_eq!(guard.guards().len(), 3);
    guard.unlock().expect("unlock");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let left: i64 = masters.servers[0].cmd(&["DBSIZE"]);
    assert_eq!(left, 0);
}

#[test]
fn multilocks_of_two_clients_exclude_each_other_under_contention() {
    let masters = Masters::start();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let clients = masters.clients();
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            thread::spawn(move || {
                let multi = MultiLock::new(members(&clients, "contended"));
                for _ in 0..15 {
                    let guard = multi.lock().expect("lock");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::sleep(Duration::from_millis(1));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().expect("unlock");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(masters.holders("contended"), 0);
}

#[test]
fn a_lease_with_a_wait_leaves_every_member_with_the_lease() {
    let masters = Masters::start();
    let clients = masters.clients();
    let lease = Duration::from_secs(20);
    let guard = RedLock::new(members(&clients, "leased"))
        .with_lease(lease)
        .try_lock_for(Duration::from_secs(1))
        .expect("try_lock_for")
        .expect("acquired");
    for server in &masters.servers {
        let ttl = pttl(server, "leased");
        assert!(ttl > 15_000 && ttl <= 20_000, "PTTL {ttl}");
    }
    let validity = guard.validity();
    assert!(
        validity < lease && validity > Duration::from_secs(18),
        "{validity:?}"
    );
    guard.unlock().expect("unlock");
}

/// The ordered attempt (after the all-at-once one found a member held)
/// takes each member with twice the wait, then sets every member to the
/// lease once all are held: no member is left to expire at the shorter
/// member lease (found by cargo-mutants: `set_lease` could do nothing and
/// every test still passed).
#[test]
fn an_ordered_attempt_leaves_every_member_with_the_lease() {
    let masters = Masters::start();
    let clients = masters.clients();
    let rival = Client::builder(masters.servers[2].url())
        .build()
        .expect("rival");
    let held = rival
        .lock("ordered")
        .lock_owned()
        .expect("rival takes a member");
    let releaser = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        held.unlock().expect("rival releases");
    });
    let lease = Duration::from_secs(20);
    let guard = MultiLock::new(members(&clients, "ordered"))
        .with_lease(lease)
        .try_lock_for(Duration::from_secs(3))
        .expect("try_lock_for")
        .expect("acquired once the rival let go");
    releaser.join().expect("releaser");
    for server in &masters.servers {
        let ttl = pttl(server, "ordered");
        // Twice the wait would be 6 s at most.
        assert!(ttl > 15_000 && ttl <= 20_000, "PTTL {ttl}");
    }
    guard.unlock().expect("unlock");
}

#[test]
fn unlock_tries_every_member_and_reports_the_first_error() {
    let mut masters = Masters::start();
    let clients = masters.clients();
    let guard = MultiLock::new(members(&clients, "unlock-all"))
        .lock()
        .expect("lock");
    masters.servers[1].stop();
    assert!(guard.unlock().is_err(), "the dead member's unlock failed");
    for i in [0, 2, 3, 4] {
        let exists: bool = masters.servers[i].cmd(&["EXISTS", "unlock-all"]);
        assert!(!exists, "member {i} was left held");
    }
}

#[test]
fn a_redlock_guard_is_lost_when_fewer_than_a_majority_remain() {
    let masters = Masters::start();
    let clients = masters.clients();
    let guard = RedLock::new(members(&clients, "dwindling"))
        .lock()
        .expect("lock");
    for client in &clients[..2] {
        client.lock("dwindling").force_unlock().expect("force");
    }
    assert!(!guard.is_lost(), "3 of 5 still held");
    clients[2].lock("dwindling").force_unlock().expect("force");
    assert!(guard.is_lost(), "2 of 5 is no majority");
    let _ = guard.unlock();
}

#[test]
fn a_member_whose_acquire_reply_timed_out_is_released_in_the_background() {
    // The member's acquire ran, but its reply came after the response
    // timeout: the attempt fails on that member, and the member it may have
    // taken is released rather than left until its lease runs out.
    let masters = Masters::start();
    let proxy = support::proxy::Proxy::start(masters.servers[0].port());
    let mut clients = masters.clients();
    clients[0] = Client::builder(proxy.url())
        .response_timeout(Duration::from_millis(200))
        .build()
        .expect("proxied client");
    // Warm the proxied client's scripts so that the delayed reply is the acquire's.
    clients[0]
        .lock("warm")
        .lock()
        .expect("warm")
        .unlock()
        .expect("warm unlock");
    proxy.arm(
        "late-member",
        support::proxy::Fault::DelayReply(Duration::from_millis(600)),
    );
    let multi = MultiLock::new(members(&clients, "late-member"));
    let got = multi
        .try_lock_for(Duration::from_millis(100))
        .expect("try_lock_for");
    assert!(got.is_none(), "acquired although a member's reply was lost");
    assert!(
        eventually(Duration::from_secs(5), || masters.holders("late-member")
            == 0),
        "a member taken by the lost reply was left held"
    );
}

/// Regression: a failed attempt returned while its undo ran on a
/// background thread, so right after `try_lock` said no, this client still
/// held the members it had taken (PTTL 30 s on them). Redisson undoes
/// before returning false; so does this crate when the servers answer.
#[test]
fn a_failed_attempt_has_released_what_it_took_when_it_returns() {
    let masters = Masters::start();
    let clients = masters.clients_with_timeout(Duration::from_secs(3));
    let other = masters.clients();
    for round in 0..20 {
        let name = format!("undone-{round}");
        let blocker = other[round % 5].lock(&name).lock().expect("blocker");
        let multi = MultiLock::new(members(&clients, &name));
        assert!(multi.try_lock().expect("try_lock").is_none());
        assert_eq!(masters.holders(&name), 1, "multilock round {round}");
        let timed = multi.try_lock_for(Duration::from_millis(30));
        assert!(timed.expect("try_lock_for").is_none());
        assert_eq!(masters.holders(&name), 1, "timed multilock round {round}");
        drop(blocker);
        // A RedLock short of a majority: three of five held elsewhere.
        let blockers: Vec<_> = (0..3)
            .map(|i| other[(round + i) % 5].lock(&name).lock().expect("blocker"))
            .collect();
        let red = RedLock::new(members(&clients, &name));
        assert!(red.try_lock().expect("try_lock").is_none());
        assert_eq!(masters.holders(&name), 3, "redlock round {round}");
        drop(blockers);
    }
}

#[test]
fn the_members_releases_are_sent_at_once_not_one_after_another() {
    // Three masters behind proxies; each member's release reply is held
    // 400 ms. Sent together (one round trip for all), the unlock takes one
    // delay; member after member, three.
    let masters = Masters::start();
    let proxies: Vec<_> = masters.servers[..3]
        .iter()
        .map(|server| support::proxy::Proxy::start(server.port()))
        .collect();
    let clients: Vec<Client> = proxies
        .iter()
        .map(|proxy| {
            Client::builder(proxy.url())
                .response_timeout(Duration::from_secs(2))
                .build()
                .expect("proxied client")
        })
        .collect();
    let multi = MultiLock::new(members(&clients, "released-at-once"));
    // Warm: every member's scripts loaded, so each delayed reply is its
    // release's.
    multi.lock().expect("warm").unlock().expect("warm unlock");
    let guard = multi.lock().expect("lock");
    let delay = Duration::from_millis(400);
    for proxy in &proxies {
        proxy.arm("released-at-once", support::proxy::Fault::DelayReply(delay));
    }
    let started = Instant::now();
    guard.unlock().expect("unlock");
    let took = started.elapsed();
    assert!(
        proxies.iter().all(|proxy| !proxy.armed()),
        "a release was not delayed"
    );
    assert!(
        took < delay * 5 / 2,
        "the unlock took {took:?}: its three releases were not sent together"
    );
    assert_eq!(masters.holders("released-at-once"), 0);
}
