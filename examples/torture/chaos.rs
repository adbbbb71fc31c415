//! The supervisor's side: spawning and burying workers, and the chaos
//! actions (kills, connection kills, pauses and stops of Redis).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis::Commands;

use crate::failover::ClusterState;
use crate::fenced_jvm::FencedJvm;
use crate::history::{History, sup_event};
use crate::sem_supervisor;
use crate::summary::{SharedStats, stats_of};
use crate::worker::Book;
use crate::{
    LEASE_MS, LockKind, NAMES, Rng, SHORT_PAUSE_MAX_MS, STOP_WAIT, WORKERS, dead_key,
    fair_queue_key, fair_timeout_key, instance_of, ms, now_ms, occupancy_key, waiting_key,
};

/// Removes a dead client's entries (`<client id>:<thread>`) from a fair
/// lock's queue and deadline zset; returns how many.
static REAP_QUEUE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local n = 0
for _, field in ipairs(redis.call('lrange', KEYS[1], 0, -1)) do
  if string.sub(field, 1, #ARGV[1]) == ARGV[1] then
    redis.call('lrem', KEYS[1], 0, field)
    redis.call('zrem', KEYS[2], field)
    n = n + 1
  end
end
return n
",
    )
});

/// How long after a chaos action a fair waiter may be held up by it (ms):
/// a dead holder's lease, a missed wake-up (a waiter polls at the holder's
/// TTL, at most a lease), a reconnection after a response timeout.
const KILL_EFFECT_MS: u64 = LEASE_MS + 1000;
const CONN_KILL_EFFECT_MS: u64 = 1500;
const PUBSUB_KILL_EFFECT_MS: u64 = LEASE_MS + 1000;
const PAUSE_EFFECT_MS: u64 = 1000;

pub struct WorkerProc {
    pub generation: u32,
    pub instance: String,
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub reader: Option<JoinHandle<()>>,
}

pub struct Supervisor {
    pub exe: PathBuf,
    pub url: String,
    pub kind: LockKind,
    pub log_dir: PathBuf,
    pub stats: SharedStats,
    pub redis: Book,
    pub never: AtomicBool,
    pub workers: Vec<WorkerProc>,
    /// Instance -> when it was known dead (after `wait`).
    pub dead_at: HashMap<String, u64>,
    /// (lock, kill time): the killed process held that lock.
    pub killed_holds: Vec<(String, u64)>,
    /// Intervals (ms) during which Redis was paused or stopped, with whether
    /// the pause was longer than the lease.
    pub pauses: Vec<(u64, u64, bool)>,
    /// Intervals (ms) during which a chaos action may hold up a fair waiter.
    pub disruptions: Vec<(u64, u64)>,
    pub kills: u64,
    pub unexpected_exits: Vec<String>,
    pub conn_kills: u64,
    pub pubsub_kills: u64,
    pub client_pauses: u64,
    pub sigstops: u64,
    /// Dead processes' entries removed from fair queues.
    pub reaped_waiters: u64,
    /// The supervisor's client in a semaphore run (`semaphore.rs`).
    pub sem: Option<redisson_lock::Client>,
    /// Dead workers' permits returned and in-flight operations made ambiguous.
    pub reclaims: sem_supervisor::Reclaims,
    /// The interop driver's jar for a JVM worker in a semaphore run, and
    /// that worker (`jvm.rs`).
    pub java_jar: Option<PathBuf>,
    pub java: Option<crate::jvm::JavaWorker>,
    /// A fenced run's JVM workers (`fenced_jvm.rs`): one per jar.
    pub fenced_jars: Vec<PathBuf>,
    pub fenced_javas: Vec<FencedJvm>,
    /// The run's history (`history.rs`), if it keeps one, and its file.
    pub history: Option<History>,
    pub history_path: Option<PathBuf>,
    /// Faults recorded in the history (their ids).
    pub faults: u64,
    /// SIGSTOPs of workers, SIGKILLs of JVM workers (fenced runs).
    pub worker_stops: u64,
    pub java_kills: u64,
    /// Some pauses and stops outlast the lease (`--beyond-lease`).
    pub beyond_lease: bool,
    /// The cluster of a `--cluster` run (`failover.rs`).
    pub cluster: Option<ClusterState>,
}

/// Thaws redis-server if the supervisor dies while it is stopped.
pub struct ContinueOnDrop(pub Option<u32>);

impl Drop for ContinueOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            signal(pid, "CONT");
        }
    }
}

pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl Supervisor {
    pub fn spawn_worker(&mut self, slot: usize, generation: u32) -> std::io::Result<WorkerProc> {
        let instance = format!("w{slot}g{generation}");
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_dir.join(format!("worker-{slot}.log")))?;
        let mut command = Command::new(&self.exe);
        command
            .args(["worker", "--instance", &instance, "--url", &self.url])
            .args(["--kind", self.kind.as_str()]);
        if let Some(cluster) = &self.cluster {
            command.args(["--cluster-seeds", &cluster.seeds()]);
        }
        if self.history.is_some() {
            command.arg("--history");
        }
        if self.kind == LockKind::Fenced && self.beyond_lease {
            command.arg("--short-reentries");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()?;
        sup_event(
            self.history.as_ref(),
            format_args!(
                "process start target={instance} impl=rust pid={}",
                child.id()
            ),
        );
        let stdout = child.stdout.take().expect("piped stdout");
        let stats = Arc::clone(&self.stats);
        let history = self.history.clone();
        let reader_instance = instance.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match (line.strip_prefix("H "), &history) {
                    (Some(event), Some(history)) => history.line(event),
                    _ => stats_of(&stats).record(&reader_instance, &line),
                }
            }
        });
        Ok(WorkerProc {
            generation,
            instance,
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
        })
    }

    /// After a worker died: which locks it held (by its client id in the
    /// lock hashes), then mark it dead so its stale tokens get dropped. In a
    /// fair run, also remove its threads from the fair queues: a dead
    /// waiter's entry otherwise holds up everyone behind it until its
    /// deadline (Redisson's `fairLockWaitTimeout`, 300 s by default).
    fn bury(&mut self, instance: &str, died_ms: u64, killed_at: u64) {
        self.dead_at.insert(instance.to_owned(), died_ms);
        let client_id = stats_of(&self.stats).client_ids.get(instance).cloned();
        let dead = dead_key(instance);
        self.redis
            .retry(&self.never, |con| con.set::<_, _, ()>(&dead, 1));
        if let Some(client) = &self.sem {
            // Semaphores are not hashes: no holder to read from them. Its
            // stale occupancy tokens go first, then its permits are returned.
            for name in NAMES {
                let key = occupancy_key(name);
                let members: Vec<String> = self
                    .redis
                    .retry(&self.never, |con| con.smembers(&key))
                    .unwrap_or_default();
                for member in members.iter().filter(|m| instance_of(m) == instance) {
                    self.redis
                        .retry(&self.never, |con| con.srem::<_, _, ()>(&key, member));
                }
            }
            sem_supervisor::bury(&mut self.redis, client, instance, &mut self.reclaims);
            return;
        }
        for name in NAMES {
            let fields: Vec<String> = self
                .on_lock_key(name, |con| con.hkeys(name))
                .unwrap_or_default();
            let held = client_id.as_ref().is_some_and(|id| {
                fields.iter().any(|field| {
                    field
                        .strip_prefix(id.as_str())
                        .is_some_and(|rest| rest.starts_with(':'))
                })
            });
            if held {
                self.killed_holds.push((name.to_owned(), killed_at));
            }
            if std::env::var_os("TORTURE_DEBUG").is_some() {
                eprintln!(
                    "torture: buried {instance} ({client_id:?}): {name} fields {fields:?} held={held}"
                );
            }
            for key in [occupancy_key(name), waiting_key(name)] {
                let members: Vec<String> = self
                    .redis
                    .retry(&self.never, |con| con.smembers(&key))
                    .unwrap_or_default();
                for member in members.iter().filter(|m| instance_of(m) == instance) {
                    self.redis
                        .retry(&self.never, |con| con.srem::<_, _, ()>(&key, member));
                }
            }
            if self.kind == LockKind::Fair
                && let Some(id) = &client_id
            {
                let prefix = format!("{id}:");
                let (queue, timeout) = (fair_queue_key(name), fair_timeout_key(name));
                let reaped = self.on_lock_key(&queue, |con| {
                    REAP_QUEUE
                        .key(&queue)
                        .key(&timeout)
                        .arg(&prefix)
                        .invoke::<u64>(con)
                });
                self.reaped_waiters += reaped.unwrap_or(0);
            }
        }
    }

    pub fn kill_worker(&mut self, slot: usize) -> std::io::Result<()> {
        let instance = self.workers[slot].instance.clone();
        let fault = self.fault_begin("kill-rust", &format!("target={instance}"));
        let worker = &mut self.workers[slot];
        let killed_at = now_ms();
        worker.child.kill()?;
        worker.child.wait()?;
        let died = now_ms();
        let generation = worker.generation;
        self.fault_end("kill-rust", fault);
        sup_event(
            self.history.as_ref(),
            format_args!("process exit target={instance} how=sigkill"),
        );
        self.kills += 1;
        self.bury(&instance, died, killed_at);
        self.disruptions
            .push((killed_at, now_ms() + KILL_EFFECT_MS));
        self.workers[slot] = self.spawn_worker(slot, generation + 1)?;
        Ok(())
    }

    /// Restarts workers that exited without being asked to.
    fn check_workers(&mut self) -> std::io::Result<()> {
        for slot in 0..self.workers.len() {
            if let Some(status) = self.workers[slot].child.try_wait()? {
                let died = now_ms();
                let instance = self.workers[slot].instance.clone();
                eprintln!("torture: worker {instance} exited on its own: {status}");
                sup_event(
                    self.history.as_ref(),
                    format_args!("process exit target={instance} how=unexpected"),
                );
                self.unexpected_exits.push(instance.clone());
                self.bury(&instance, died, died);
                self.disruptions.push((died, now_ms() + KILL_EFFECT_MS));
                let generation = self.workers[slot].generation;
                self.workers[slot] = self.spawn_worker(slot, generation + 1)?;
            }
        }
        Ok(())
    }

    /// Sleeps `duration`, looking after the workers meanwhile.
    pub fn idle(&mut self, duration: Duration) -> std::io::Result<()> {
        let until = Instant::now() + duration;
        loop {
            self.check_workers()?;
            self.advance_failover();
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            thread::sleep(left.min(ms(50)));
        }
    }

    /// How long the next pause or stop lasts (ms), and whether that is
    /// longer than the lease.
    fn pause_length(&self, rng: &mut Rng) -> (u64, bool) {
        if self.beyond_lease && rng.percent(35) {
            (rng.range(LEASE_MS + 300, LEASE_MS + 1500), true)
        } else {
            (rng.range(100, SHORT_PAUSE_MAX_MS), false)
        }
    }

    pub fn chaos(&mut self, rng: &mut Rng, redis_pid: Option<u32>) -> std::io::Result<()> {
        if self.kind == LockKind::Fenced && rng.percent(30) {
            return self.process_chaos(rng);
        }
        if self.cluster.is_some() {
            return self.cluster_chaos(rng);
        }
        let start = now_ms();
        match rng.below(100) {
            0..=24 => {
                let slot = rng.below(WORKERS as u64) as usize;
                self.kill_worker(slot)?;
            }
            25..=44 => {
                let fault = self.fault_begin("conn-kill", "");
                let never = &self.never;
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
                        .query::<i64>(con)
                });
                self.fault_end("conn-kill", fault);
                self.conn_kills += 1;
                self.disruptions
                    .push((start, now_ms() + CONN_KILL_EFFECT_MS));
            }
            45..=59 => {
                let fault = self.fault_begin("pubsub-kill", "");
                let never = &self.never;
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "pubsub"])
                        .query::<i64>(con)
                });
                self.fault_end("pubsub-kill", fault);
                self.pubsub_kills += 1;
                self.disruptions
                    .push((start, now_ms() + PUBSUB_KILL_EFFECT_MS));
            }
            60..=79 => {
                let (pause, long) = self.pause_length(rng);
                let kind = if long {
                    "redis-pause-long"
                } else {
                    "redis-pause"
                };
                let fault = self.fault_begin(kind, &format!("ms={pause}"));
                let never = &self.never;
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(pause)
                        .arg("ALL")
                        .query::<()>(con)
                });
                self.pauses.push((start, start + pause, long));
                self.disruptions
                    .push((start, start + pause + PAUSE_EFFECT_MS));
                self.client_pauses += 1;
                self.idle(ms(pause))?;
                self.fault_end(kind, fault);
            }
            _ => {
                let Some(pid) = redis_pid else {
                    return Ok(());
                };
                let (pause, long) = self.pause_length(rng);
                let kind = if long {
                    "redis-stop-long"
                } else {
                    "redis-stop"
                };
                let fault = self.fault_begin(kind, &format!("ms={pause}"));
                signal(pid, "STOP");
                thread::sleep(ms(pause));
                signal(pid, "CONT");
                self.fault_end(kind, fault);
                let end = now_ms();
                self.pauses.push((start, end, long));
                self.disruptions.push((start, end + PAUSE_EFFECT_MS));
                self.sigstops += 1;
            }
        }
        Ok(())
    }

    /// Records the start of a fault in the history; returns its id.
    pub fn fault_begin(&mut self, kind: &str, detail: &str) -> u64 {
        self.faults += 1;
        sup_event(
            self.history.as_ref(),
            format_args!("fault invoke type={kind} id={} {detail}", self.faults),
        );
        self.faults
    }

    pub fn fault_end(&self, kind: &str, id: u64) {
        sup_event(
            self.history.as_ref(),
            format_args!("fault ok type={kind} id={id}"),
        );
    }

    /// A fenced run's chaos on the workers themselves: a SIGSTOP of a Rust
    /// or JVM worker (within a third of the lease; with `--beyond-lease`, a
    /// third of a Rust worker's stops last longer than the lease), or a
    /// SIGKILL of a JVM worker, started again at once.
    fn process_chaos(&mut self, rng: &mut Rng) -> std::io::Result<()> {
        let javas = self.fenced_javas.len() as u64;
        if javas > 0 && rng.percent(25) {
            let slot = rng.below(javas) as usize;
            return self.kill_java(slot);
        }
        let slot = rng.below(WORKERS as u64 + javas) as usize;
        let (pid, instance, java) = match slot.checked_sub(WORKERS) {
            None => {
                let worker = &self.workers[slot];
                (worker.child.id(), worker.instance.clone(), false)
            }
            Some(j) => {
                let jvm = &self.fenced_javas[j];
                (jvm.pid(), jvm.instance.clone(), true)
            }
        };
        let (pause, long) = if java {
            (rng.range(100, SHORT_PAUSE_MAX_MS), false)
        } else {
            self.pause_length(rng)
        };
        let kind = match (java, long) {
            (true, _) => "sigstop-java",
            (false, false) => "sigstop-rust",
            (false, true) => "sigstop-rust-long",
        };
        let fault = self.fault_begin(kind, &format!("target={instance} ms={pause}"));
        signal(pid, "STOP");
        thread::sleep(ms(pause));
        signal(pid, "CONT");
        self.fault_end(kind, fault);
        self.worker_stops += 1;
        let start = now_ms();
        self.disruptions
            .push((start - pause, start + PAUSE_EFFECT_MS));
        Ok(())
    }

    /// SIGKILLs a fenced run's JVM worker and starts a new one in its slot.
    pub fn kill_java(&mut self, slot: usize) -> std::io::Result<()> {
        let instance = self.fenced_javas[slot].instance.clone();
        let fault = self.fault_begin("kill-java", &format!("target={instance}"));
        let killed_at = now_ms();
        self.fenced_javas[slot].kill();
        self.fault_end("kill-java", fault);
        sup_event(
            self.history.as_ref(),
            format_args!("process exit target={instance} how=sigkill"),
        );
        self.java_kills += 1;
        self.disruptions
            .push((killed_at, now_ms() + KILL_EFFECT_MS));
        let next = self.fenced_javas[slot].generation + 1;
        let jvm = self.spawn_java(slot, next, false)?;
        self.fenced_javas[slot] = jvm;
        Ok(())
    }

    /// Starts the JVM worker of slot `slot` (`fenced_jvm.rs`).
    pub fn spawn_java(
        &mut self,
        slot: usize,
        generation: u32,
        wait_ready: bool,
    ) -> std::io::Result<FencedJvm> {
        let target = match &self.cluster {
            Some(cluster) => format!("cluster:{}", cluster.seeds()),
            None => self.url.clone(),
        };
        FencedJvm::spawn(
            &self.fenced_jars[slot],
            &target,
            &self.log_dir,
            &self.stats,
            self.history.as_ref(),
            (slot, generation),
            (wait_ready, self.beyond_lease),
        )
    }

    /// Asks every worker to finish (closes its stdin) and waits for it.
    pub fn stop_workers(&mut self) -> u64 {
        let mut hangs = 0;
        for worker in &mut self.workers {
            worker.stdin.take();
        }
        let deadline = Instant::now() + STOP_WAIT;
        for worker in &mut self.workers {
            loop {
                match worker.child.try_wait() {
                    Ok(Some(status)) => {
                        sup_event(
                            self.history.as_ref(),
                            format_args!("process exit target={} how=stopped", worker.instance),
                        );
                        if !status.success() {
                            eprintln!(
                                "torture: worker {} exited with {status} when asked to stop",
                                worker.instance
                            );
                            self.unexpected_exits.push(worker.instance.clone());
                        }
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => thread::sleep(ms(50)),
                    _ => {
                        eprintln!(
                            "torture: worker {} did not stop within {STOP_WAIT:?}",
                            worker.instance
                        );
                        hangs += 1;
                        let _ = worker.child.kill();
                        let _ = worker.child.wait();
                        sup_event(
                            self.history.as_ref(),
                            format_args!("process exit target={} how=hung", worker.instance),
                        );
                        break;
                    }
                }
            }
            if let Some(reader) = worker.reader.take() {
                let _ = reader.join();
            }
        }
        hangs
    }

    /// Milliseconds of `[from, to]` during which Redis was paused or
    /// stopped, or a cluster failover was in progress.
    pub fn paused_within(&self, from: u64, to: u64) -> u64 {
        let outages = self.cluster.iter().flat_map(|c| c.outages.iter().copied());
        self.pauses
            .iter()
            .map(|&(start, end, _)| (start, end))
            .chain(outages)
            .map(|(start, end)| to.min(end).saturating_sub(from.max(start)))
            .sum()
    }

    pub fn after_long_pause(&self, at: u64) -> bool {
        self.pauses
            .iter()
            .any(|&(start, end, long)| long && start <= at && at <= end + 5000)
    }

    /// Whether a chaos action may have held up anything during `[from, to]`.
    pub fn disrupted(&self, from: u64, to: u64) -> bool {
        self.disruptions
            .iter()
            .any(|&(start, end)| start <= to && from <= end)
    }
}
