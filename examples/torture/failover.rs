//! The chaos of a `--cluster` run: besides worker kills, connection kills
//! on every master and short pauses or stops of one master, a failover every
//! few seconds, alternately
//!
//! - *coordinated*: `CLUSTER FAILOVER` on the replica of a master serving
//!   one of the locks (the master stops writes until the replica has caught
//!   up, then they switch): no overlap is allowed across it;
//! - *master kill*: `kill -9` of a master serving one of the locks; the
//!   cluster promotes its replica (after `cluster-node-timeout` and an
//!   election, about 4 s), then the killed node is started again with its
//!   `nodes.conf` and rejoins as the new master's replica. A lock write the
//!   replica had not received is lost, and with the lease shorter than the
//!   failover every hold on that master runs out meanwhile, as do holds on
//!   the other masters: from the failure report to the promotion the cluster
//!   refuses every slot (`cluster-require-full-coverage`, on by default). An
//!   overlap from the kill to 5 s after the promotion is acceptable only if
//!   its earlier holder was told (`overlaps_after_master_kill`).
//!
//! One failover at a time, each followed to its end (every node agrees on
//! the new master and the former one replicates from it) before the next.

use std::time::{Duration, Instant};

use crate::chaos::{Supervisor, signal};
use crate::cluster::{self, Nodes, Range, replica_in_sync};
use crate::history::{History, sup_event};
use crate::{LEASE_MS, NAMES, Rng, SHORT_PAUSE_MAX_MS, WORKERS, ms, now_ms};

/// How long after the promotion an overlap on a killed master's lock
/// counts as its consequence.
const KILL_WINDOW_MS: u64 = 5000;
/// A failover not finished within this long is stuck (a failure).
const FAILOVER_DEADLINE: Duration = Duration::from_secs(30);

enum Pending {
    Coordinated {
        replica: u16,
        old: u16,
        started: u64,
        deadline: Instant,
    },
    Killed {
        replica: u16,
        old: u16,
        killed: u64,
        deadline: Instant,
        promoted: bool,
    },
}

pub struct ClusterState {
    pub nodes: Nodes,
    /// The masters as last seen, in slot order.
    masters: Vec<u16>,
    pending: Option<Pending>,
    next_failover: Instant,
    next_is_kill: bool,
    last_check: Instant,
    rng: Rng,
    pub coordinated: u64,
    pub master_kills: u64,
    /// Failovers that did not finish within `FAILOVER_DEADLINE`.
    pub stuck: u64,
    /// Master changes the chaos did not cause.
    pub unplanned: u64,
    /// (lock, from, until) in ms: the lock's master was killed at `from`.
    pub kill_windows: Vec<(String, u64, u64)>,
    /// (from, to) in ms: a failover in progress (locks may be unavailable).
    pub outages: Vec<(u64, u64)>,
    /// The run's history: failovers are faults in it (ids `c<n>`).
    pub history: Option<History>,
    failovers: u64,
}

fn masters_of(table: &[Range]) -> Vec<u16> {
    table.iter().map(|r| r.master).collect()
}

impl ClusterState {
    /// Checks that the 3 lock names are served by 3 different masters.
    pub fn new(nodes: Nodes) -> std::io::Result<ClusterState> {
        let table = nodes
            .slots()
            .ok_or_else(|| std::io::Error::other("no slot table"))?;
        let mut owners: Vec<u16> = Vec::new();
        for name in NAMES {
            let slot = redisson_lock::key_slot(name.as_bytes());
            let range = Nodes::range_of(&table, slot)
                .ok_or_else(|| std::io::Error::other(format!("slot {slot} not served")))?;
            eprintln!(
                "torture: lock {name}: slot {slot}, master 127.0.0.1:{}",
                range.master
            );
            owners.push(range.master);
        }
        owners.sort_unstable();
        owners.dedup();
        if owners.len() != NAMES.len() {
            return Err(std::io::Error::other(
                "the lock names do not land on different masters",
            ));
        }
        Ok(ClusterState {
            masters: masters_of(&table),
            nodes,
            pending: None,
            next_failover: Instant::now() + Duration::from_secs(3),
            next_is_kill: false,
            last_check: Instant::now(),
            rng: Rng::seeded(7),
            coordinated: 0,
            master_kills: 0,
            stuck: 0,
            unplanned: 0,
            kill_windows: Vec::new(),
            outages: Vec::new(),
            history: None,
            failovers: 0,
        })
    }

    /// The workers' seeds: the masters' URLs, comma-separated.
    pub fn seeds(&self) -> String {
        let urls: Vec<String> = self.masters.iter().map(|&p| cluster::url(p)).collect();
        urls.join(",")
    }

    pub fn pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Ports of the masters running now.
    fn running_masters(&self) -> Vec<u16> {
        let running = self.nodes.running();
        self.masters
            .iter()
            .copied()
            .filter(|p| running.contains(p))
            .collect()
    }

    /// Every running node names `master` for the range `replica` belongs
    /// to now, lists `replica` as its replica, and `replica`'s link is up.
    fn switched(&self, master: u16, replica: u16) -> bool {
        self.nodes.running().into_iter().all(|port| {
            cluster::slots_of(port).is_some_and(|table| {
                table
                    .iter()
                    .any(|r| r.master == master && r.replicas.contains(&replica))
            })
        }) && replica_in_sync(replica)
    }

    /// Starts the next failover on the master of a random lock, if its
    /// replica is in sync; returns whether it started.
    fn start(&mut self) -> bool {
        let Some(table) = self.nodes.slots() else {
            return false;
        };
        let name = NAMES[self.rng.below(NAMES.len() as u64) as usize];
        let slot = redisson_lock::key_slot(name.as_bytes());
        let Some(range) = Nodes::range_of(&table, slot) else {
            return false;
        };
        let (old, Some(&replica)) = (range.master, range.replicas.first()) else {
            return false;
        };
        if !replica_in_sync(replica) {
            return false;
        }
        let now = now_ms();
        let deadline = Instant::now() + FAILOVER_DEADLINE;
        self.failovers += 1;
        sup_event(
            self.history.as_ref(),
            format_args!(
                "fault invoke type={} id=c{} lock={name} master={old} replica={replica}",
                if self.next_is_kill {
                    "failover-master-kill"
                } else {
                    "failover-coordinated"
                },
                self.failovers
            ),
        );
        if self.next_is_kill {
            // Every lock: from the failure report to the promotion the
            // cluster refuses every slot (`cluster-require-full-coverage`,
            // on by default), so holds on the other masters run out too.
            for name in NAMES {
                self.kill_windows.push((name.to_owned(), now, u64::MAX));
            }
            eprintln!("torture: {now} kill -9 of master 127.0.0.1:{old} (serving {name})");
            self.nodes.kill(old);
            self.pending = Some(Pending::Killed {
                replica,
                old,
                killed: now,
                deadline,
                promoted: false,
            });
        } else {
            if let Err(e) = cluster::query::<()>(replica, &["CLUSTER", "FAILOVER"]) {
                eprintln!("torture: CLUSTER FAILOVER on 127.0.0.1:{replica}: {e}");
                sup_event(
                    self.history.as_ref(),
                    format_args!(
                        "fault ok type=failover-coordinated id=c{} refused=1",
                        self.failovers
                    ),
                );
                return false;
            }
            self.pending = Some(Pending::Coordinated {
                replica,
                old,
                started: now,
                deadline,
            });
        }
        self.next_is_kill = !self.next_is_kill;
        true
    }

    /// Follows the failover in progress one step; without one, looks for
    /// master changes nobody asked for. Returns a finished failover's
    /// (start, end) in ms.
    fn advance(&mut self) -> Option<(u64, u64)> {
        let now = now_ms();
        let finished = match self.pending.take()? {
            Pending::Coordinated {
                replica,
                old,
                started,
                deadline,
            } => {
                if self.switched(replica, old) {
                    self.coordinated += 1;
                    eprintln!(
                        "torture: {started} CLUSTER FAILOVER 127.0.0.1:{old} -> {replica} done in {} ms",
                        now - started
                    );
                    Some(started)
                } else if Instant::now() > deadline {
                    self.stuck += 1;
                    eprintln!("torture: STUCK: CLUSTER FAILOVER {old} -> {replica} not done");
                    Some(started)
                } else {
                    self.pending = Some(Pending::Coordinated {
                        replica,
                        old,
                        started,
                        deadline,
                    });
                    None
                }
            }
            Pending::Killed {
                replica,
                old,
                killed,
                deadline,
                promoted,
            } => {
                let mut promoted = promoted;
                if !promoted
                    && self.nodes.slots().is_some_and(|table| {
                        masters_of(&table).contains(&replica) && !masters_of(&table).contains(&old)
                    })
                {
                    promoted = true;
                    self.master_kills += 1;
                    eprintln!(
                        "torture: {now} 127.0.0.1:{replica} promoted {} ms after the kill of {old}",
                        now - killed
                    );
                    for window in &mut self.kill_windows {
                        if window.1 == killed {
                            window.2 = now + KILL_WINDOW_MS;
                        }
                    }
                    if let Err(e) = self.nodes.restart(old) {
                        eprintln!("torture: {e}");
                    }
                }
                if promoted && self.switched(replica, old) {
                    eprintln!(
                        "torture: 127.0.0.1:{old} replicates {replica}, {} ms after its kill",
                        now - killed
                    );
                    Some(killed)
                } else if Instant::now() > deadline {
                    self.stuck += 1;
                    eprintln!("torture: STUCK: kill -9 of {old} (promoted: {promoted})");
                    if self.nodes.pid(old).is_none() {
                        let _ = self.nodes.restart(old);
                    }
                    Some(killed)
                } else {
                    self.pending = Some(Pending::Killed {
                        replica,
                        old,
                        killed,
                        deadline,
                        promoted,
                    });
                    None
                }
            }
        };
        let started = finished?;
        sup_event(
            self.history.as_ref(),
            format_args!("fault ok type=failover id=c{}", self.failovers),
        );
        if let Some(table) = self.nodes.slots() {
            self.masters = masters_of(&table);
        }
        self.next_failover = Instant::now() + ms(self.rng.range(2000, 5000));
        Some((started, now_ms()))
    }

    /// Master changes since the last look that no failover of ours explains.
    fn check_unplanned(&mut self) {
        if let Some(table) = self.nodes.slots() {
            let masters = masters_of(&table);
            if masters != self.masters {
                self.unplanned += 1;
                eprintln!(
                    "torture: UNPLANNED FAILOVER: masters {:?} -> {masters:?}",
                    self.masters
                );
                self.masters = masters;
            }
        }
    }
}

impl Supervisor {
    /// Called every 50 ms by [`Supervisor::idle`]: follows a failover in
    /// progress (every 100 ms) and watches for unplanned ones (every 1 s).
    pub fn advance_failover(&mut self) {
        let Some(cluster) = self.cluster.as_mut() else {
            return;
        };
        let every = if cluster.pending() { ms(100) } else { ms(1000) };
        if cluster.last_check.elapsed() < every {
            return;
        }
        cluster.last_check = Instant::now();
        if !cluster.pending() {
            cluster.check_unplanned();
            return;
        }
        if let Some((started, ended)) = cluster.advance() {
            cluster.outages.push((started, ended + 1000));
            self.disruptions.push((started, ended + LEASE_MS + 1000));
        }
    }

    /// Waits for the failover in progress to finish (each has a deadline).
    pub fn finish_failover(&mut self) -> std::io::Result<()> {
        while self.cluster.as_ref().is_some_and(ClusterState::pending) {
            self.idle(ms(100))?;
        }
        Ok(())
    }

    /// Whether `name`'s master had been killed shortly before `at`.
    pub fn after_master_kill(&self, name: &str, at: u64) -> bool {
        self.cluster.as_ref().is_some_and(|c| {
            c.kill_windows
                .iter()
                .any(|(n, from, until)| n == name && *from <= at && at <= *until)
        })
    }

    /// One chaos action of a cluster run (see the module docs).
    pub fn cluster_chaos(&mut self, rng: &mut Rng) -> std::io::Result<()> {
        let Some(cluster) = self.cluster.as_mut() else {
            return Ok(());
        };
        let pending = cluster.pending();
        if !pending && Instant::now() >= cluster.next_failover && cluster.start() {
            return Ok(());
        }
        let masters = cluster.running_masters();
        let start = now_ms();
        match rng.below(100) {
            0..=29 => self.kill_worker(rng.below(WORKERS as u64) as usize)?,
            30..=49 => {
                let fault = self.fault_begin("conn-kill", "");
                self.kill_clients(&masters, &["KILL", "TYPE", "normal", "SKIPME", "yes"]);
                self.fault_end("conn-kill", fault);
                self.conn_kills += 1;
                self.disruptions.push((start, now_ms() + 1500));
            }
            50..=69 => {
                let fault = self.fault_begin("pubsub-kill", "");
                self.kill_clients(&masters, &["KILL", "TYPE", "pubsub"]);
                self.fault_end("pubsub-kill", fault);
                self.pubsub_kills += 1;
                self.disruptions.push((start, now_ms() + LEASE_MS + 1000));
            }
            n => {
                // A pause or stop of one master, within the lease; not
                // during a failover, whose election it could hold up.
                let Some(&port) = masters.get(rng.below(masters.len() as u64) as usize) else {
                    return Ok(());
                };
                if pending {
                    return Ok(());
                }
                let pause = rng.range(100, SHORT_PAUSE_MAX_MS);
                if n < 85 {
                    let fault =
                        self.fault_begin("master-pause", &format!("port={port} ms={pause}"));
                    let arg = pause.to_string();
                    let _ = cluster::query::<()>(port, &["CLIENT", "PAUSE", &arg, "ALL"]);
                    self.client_pauses += 1;
                    self.idle(ms(pause))?;
                    self.fault_end("master-pause", fault);
                } else if let Some(pid) = self.cluster.as_ref().and_then(|c| c.nodes.pid(port)) {
                    let fault = self.fault_begin("master-stop", &format!("port={port} ms={pause}"));
                    signal(pid, "STOP");
                    std::thread::sleep(ms(pause));
                    signal(pid, "CONT");
                    self.fault_end("master-stop", fault);
                    self.sigstops += 1;
                }
                let end = now_ms().max(start + pause);
                self.pauses.push((start, end, false));
                self.disruptions.push((start, end + 1000));
            }
        }
        Ok(())
    }

    /// `CLIENT <args>` on each of `masters` (a dead one is skipped).
    fn kill_clients(&self, masters: &[u16], args: &[&str]) {
        for &port in masters {
            let mut cmd = redis::cmd("CLIENT");
            cmd.arg(args);
            if let Ok(mut con) = cluster::connect(port) {
                let _ = cmd.query::<i64>(&mut con);
            }
        }
    }

    /// Runs `op` on the server holding lock key `key`: the master serving
    /// its slot in a cluster run, else the one server.
    pub fn on_lock_key<T>(
        &mut self,
        key: &str,
        op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        match &self.cluster {
            Some(cluster) => cluster.nodes.on_key(key, op),
            None => self.redis.retry(&self.never, op),
        }
    }

    /// Runs `op` on every server holding locks (each master of a cluster).
    pub fn on_lock_servers<T>(
        &mut self,
        mut op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Vec<T> {
        match &self.cluster {
            Some(cluster) => cluster
                .running_masters()
                .into_iter()
                .filter_map(|port| cluster::connect(port).and_then(|mut c| op(&mut c)).ok())
                .collect(),
            None => self.redis.retry(&self.never, op).into_iter().collect(),
        }
    }
}
