//! A Redis Sentinel topology on free loopback ports: a master, two
//! replicas and three sentinels (quorum 2, down-after 1 s, failover timeout
//! 3 s), every one a `redis-server` (`--sentinel` for the sentinels) in its
//! own `redisson-lock-test-<run>-*` directory (`super::test_dir`).
//!
//! Started once per test binary ([`SentinelSetup::shared`]). Static values
//! are never dropped in a Rust test binary, so the processes are stopped by
//! pid by a small reaper shell started first: it waits for the test process
//! to end (passed, failed or aborted) and then kills every pid listed in its
//! file. (scripts/lib.sh's `reap_test_servers` also finds them by their
//! working directory.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::{NODE_ARGS, came_up, eventually, free_port, redis_server_binary, signal, topology_dir};

pub const MASTER_NAME: &str = "mymaster";

pub struct SentinelSetup {
    pub data_ports: Vec<u16>,
    pub sentinel_ports: Vec<u16>,
    dir: PathBuf,
    /// The data nodes' processes, in `data_ports` order (one is replaced
    /// when a test kills a master).
    data: Mutex<Vec<Child>>,
    /// The reaper and the sentinels, kept for their pids; the reaper kills
    /// them.
    _others: Vec<Child>,
}

fn data_args(port: u16, dir: &Path, replica_of: Option<u16>) -> Vec<String> {
    let port = port.to_string();
    let mut args: Vec<String> = ["--port", &port, "--repl-diskless-sync-delay", "0"]
        .iter()
        .chain(&NODE_ARGS)
        .map(|s| s.to_string())
        .collect();
    args.extend(["--dir".into(), dir.display().to_string()]);
    if let Some(master) = replica_of {
        args.extend(["--replicaof".into(), "127.0.0.1".into(), master.to_string()]);
    }
    args
}

fn record_pid(dir: &Path, child: &Child) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("pids"))
        .expect("pid file");
    writeln!(file, "{}", child.id()).expect("record a pid");
}

fn spawn_node(dir: &Path, port: u16, args: &[String]) -> Option<Child> {
    let child = Command::new(redis_server_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .current_dir(dir)
        .spawn()
        .expect("run redis-server");
    came_up(child, port)
}

/// A connection to a test node. A connect that fails is tried again for up
/// to 5 s: while the sentinels reconfigure a node (a demoted master made a
/// replica) they kill its clients, and a connection made just then is reset
/// during its handshake.
pub fn con(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("url");
    let deadline = Instant::now() + Duration::from_secs(5);
    let con = loop {
        match client.get_connection_with_timeout(Duration::from_secs(5)) {
            Ok(con) => break con,
            Err(e) if Instant::now() >= deadline => panic!("connect to test node {port}: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    };
    con.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    con
}

/// `role` of `INFO replication` (`master`, `slave`), if the node answers.
pub fn role(port: u16) -> Option<String> {
    info_field(port, "role")
}

fn info_field(port: u16, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut con(port))
        .ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_owned())
}

impl SentinelSetup {
    /// The binary's one topology, started on first use; with the lock that
    /// serializes the tests using it (failovers would disturb the others).
    pub fn shared() -> (&'static SentinelSetup, MutexGuard<'static, ()>) {
        static SETUP: OnceLock<SentinelSetup> = OnceLock::new();
        static SERIAL: Mutex<()> = Mutex::new(());
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let setup = SETUP.get_or_init(SentinelSetup::start);
        setup.wait_stable();
        (setup, serial)
    }

    fn start() -> SentinelSetup {
        let started = Instant::now();
        let (dir, reaper) = topology_dir("sentinel", &[]);
        let record = |child: &Child| record_pid(&dir, child);

        let mut children = vec![reaper];
        let mut data = Vec::new();
        let mut data_ports: Vec<u16> = Vec::new();
        for i in 0..3 {
            let node_dir = dir.join(format!("data{i}"));
            std::fs::create_dir_all(&node_dir).expect("node dir");
            let (child, port) = on_a_free_port("a data node", |port| {
                let args = data_args(port, &node_dir, data_ports.first().copied());
                spawn_node(&node_dir, port, &args)
            });
            record(&child);
            data_ports.push(port);
            data.push(child);
        }
        let master = data_ports[0];
        assert!(
            eventually(Duration::from_secs(10), || {
                info_field(master, "connected_slaves").as_deref() == Some("2")
            }),
            "the replicas connect"
        );

        let mut sentinel_ports = Vec::new();
        for i in 0..3 {
            let node_dir = dir.join(format!("sentinel{i}"));
            std::fs::create_dir_all(&node_dir).expect("sentinel dir");
            let (child, port) = on_a_free_port("a sentinel", |port| {
                let conf = node_dir.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\nloglevel warning\n\
                             sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                             sentinel failover-timeout {MASTER_NAME} 3000\n",
                        dir = node_dir.display()
                    ),
                )
                .expect("write sentinel.conf");
                let args = vec![conf.display().to_string(), "--sentinel".to_owned()];
                spawn_node(&node_dir, port, &args)
            });
            record(&child);
            sentinel_ports.push(port);
            children.push(child);
        }
        let setup = SentinelSetup {
            data_ports,
            sentinel_ports,
            dir,
            data: Mutex::new(data),
            _others: children,
        };
        setup.wait_stable();
        eprintln!("sentinel topology up in {:?}", started.elapsed());
        setup
    }

    /// `redis://127.0.0.1:<port>` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        super::local_urls("redis", &self.sentinel_ports)
    }

    /// The master's port as sentinel `i` sees it.
    fn master_by(&self, i: usize) -> Option<u16> {
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut con(self.sentinel_ports[i]))
            .ok()?;
        addr.map(|(_, port)| port)
    }

    /// The master's port, as the first sentinel sees it.
    pub fn master_port(&self) -> u16 {
        self.master_by(0).expect("the sentinels know the master")
    }

    /// Waits until every sentinel agrees on the master, it says it is one
    /// and has both replicas online, and every sentinel knows the other two
    /// and both replicas: ready for a test, or for a failover.
    pub fn wait_stable(&self) {
        let ok = eventually(Duration::from_secs(30), || {
            let Some(master) = self.master_by(0) else {
                return false;
            };
            (1..3).all(|i| self.master_by(i) == Some(master))
                && info_field(master, "role").as_deref() == Some("master")
                && info_field(master, "connected_slaves").as_deref() == Some("2")
                && (0..3).all(|i| {
                    let mut con = con(self.sentinel_ports[i]);
                    let sentinels: Vec<redis::Value> = redis::cmd("SENTINEL")
                        .arg("SENTINELS")
                        .arg(MASTER_NAME)
                        .query(&mut con)
                        .unwrap_or_default();
                    let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
                        .arg("REPLICAS")
                        .arg(MASTER_NAME)
                        .query(&mut con)
                        .unwrap_or_default();
                    sentinels.len() == 2 && replicas.len() == 2
                })
        });
        assert!(ok, "the Sentinel topology did not settle");
        // Long enough after a failover for the sentinels to accept another.
    }

    /// `FLUSHALL` on the master.
    pub fn flush(&self) {
        let () = redis::cmd("FLUSHALL")
            .query(&mut con(self.master_port()))
            .expect("FLUSHALL");
    }

    /// `SENTINEL FAILOVER` (retried while the sentinels refuse, e.g. one is
    /// still in progress), then waits until the sentinels name a new master
    /// that says it is one. A failover the sentinels accepted but did not
    /// carry out within 10 s (aborted: no replica they judged fit yet, e.g.
    /// one whose state they have not re-read since the last failover) is
    /// asked for again, of the next sentinel, for up to 90 s in all.
    /// Returns (former master, new master).
    pub fn failover(&self) -> (u16, u16) {
        let old = self.master_port();
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut asked = 0;
        let switched = || {
            let new = self.master_by(0).unwrap_or(old);
            (new != old && info_field(new, "role").as_deref() == Some("master")).then_some(new)
        };
        loop {
            // Asked again only while the master is still the old one: a
            // slow failover that completed meanwhile is not followed by a
            // second one.
            if let Some(new) = switched() {
                return (old, new);
            }
            // Each time another sentinel: one whose view of the replicas
            // is stale aborts the failover again (seen once in CI).
            let sentinel = self.sentinel_ports[asked % self.sentinel_ports.len()];
            asked += 1;
            let reply: redis::RedisResult<()> = redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER_NAME)
                .query(&mut con(sentinel));
            if let Err(e) = reply {
                assert!(Instant::now() < deadline, "SENTINEL FAILOVER refused: {e}");
                thread::sleep(Duration::from_millis(200));
                continue;
            }
            // Done (checked at the top of the loop), or asked again.
            if !eventually(Duration::from_secs(10), || switched().is_some()) {
                assert!(
                    Instant::now() < deadline,
                    "the sentinels did not switch the master"
                );
            }
        }
    }

    /// The Sentinel form of the "lost lock on failover" recipe
    /// (TOPOLOGIES §4.3): the replicas are frozen and cut off, `write` runs
    /// on the master (which no replica will ever see), the master is killed,
    /// the replicas thawed, and the sentinels promote one of them. The
    /// killed node is started again, empty, as a replica of the new master.
    /// Returns (former master, new master).
    pub fn failover_losing_writes(&self, write: impl FnOnce()) -> (u16, u16) {
        let old = self.master_port();
        let index = self
            .data_ports
            .iter()
            .position(|&p| p == old)
            .expect("a data node");
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        let replicas: Vec<u32> = (0..data.len())
            .filter(|&i| i != index)
            .map(|i| data[i].id())
            .collect();
        for &pid in &replicas {
            signal(pid, "STOP");
        }
        let thaw = || {
            for &pid in &replicas {
                signal(pid, "CONT");
            }
        };
        let killed: redis::RedisResult<i64> = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut con(old));
        if killed.is_err() {
            thaw();
            panic!("CLIENT KILL TYPE replica: {killed:?}");
        }
        let wrote = std::panic::catch_unwind(std::panic::AssertUnwindSafe(write));
        let _ = data[index].kill();
        let _ = data[index].wait();
        thaw();
        if let Err(panic) = wrote {
            std::panic::resume_unwind(panic);
        }
        let mut new = old;
        assert!(
            eventually(Duration::from_secs(30), || {
                new = self.master_by(0).unwrap_or(old);
                new != old && info_field(new, "role").as_deref() == Some("master")
            }),
            "the sentinels promoted a replica"
        );
        let node_dir = self.dir.join(format!("data{index}"));
        let args = data_args(old, &node_dir, Some(new));
        let deadline = Instant::now() + Duration::from_secs(10);
        let child = loop {
            if let Some(child) = spawn_node(&node_dir, old, &args) {
                break child;
            }
            assert!(
                Instant::now() < deadline,
                "restart the killed master as a replica"
            );
            thread::sleep(Duration::from_millis(100));
        };
        record_pid(&self.dir, &child);
        data[index] = child;
        (old, new)
    }
}

/// `spawn` on a free port, tried on up to five ports (another process may
/// take a free port before the server binds it): the child and its port.
fn on_a_free_port(what: &str, mut spawn: impl FnMut(u16) -> Option<Child>) -> (Child, u16) {
    (0..5)
        .find_map(|_| {
            let port = free_port();
            spawn(port).map(|child| (child, port))
        })
        .unwrap_or_else(|| panic!("start {what}"))
}
