//! The supervisor's workers: starting them (`spawn_worker`, and a fenced
//! run's JVM workers: `spawn_java`), burying one that died (what it held,
//! its dead mark, its stale occupancy and queue entries: `bury`),
//! restarting those that exited on their own while the supervisor idles
//! (`idle`, which also follows a cluster run's failover), and stopping
//! them all at the end (`stop_workers`).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, LazyLock};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;

use super::{KILL_EFFECT_MS, Supervisor, WorkerProc};
use crate::fenced_jvm::FencedJvm;
use crate::history::sup_event;
use crate::sem_supervisor;
use crate::summary::stats_of;
use crate::{
    LockKind, NAMES, STOP_WAIT, dead_key, fair_queue_key, fair_timeout_key, instance_of, ms,
    now_ms, occupancy_key, waiting_key,
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
    pub(super) fn bury(&mut self, instance: &str, died_ms: u64, killed_at: u64) {
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
}
