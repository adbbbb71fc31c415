//! A throwaway Redis Cluster: 3 masters + 3 replicas of `redis-server` on
//! free loopback ports, created with `redis-cli --cluster create`.
//!
//! Start one per test binary ([`Cluster::shared`], a `LazyLock`): creating
//! it takes 2–5 s. Statics are never dropped in a Rust test binary, so the
//! nodes are stopped by a reaper: a `sh` loop started with the cluster that
//! waits for this test process to exit (however it exits: success, panic,
//! abort) and then `kill -9`s every node by the pid in its pid file and
//! removes the directory. The node directories are named by
//! [`super::test_dir`] (`redisson-lock-test-<run>-*`), so `scripts/lib.sh`'s
//! `reap_test_servers` finds them too, in the run that started them only.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{LazyLock, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{came_up, eventually, free_port, redis_cli_binary, redis_server_binary, run_ok};

/// One node of the cluster.
pub struct Node {
    pub port: u16,
    /// The cluster bus port, picked free too (the default, port + 10000,
    /// may be taken or out of range).
    bus_port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

/// A running cluster; see the module docs.
pub struct Cluster {
    pub nodes: Vec<Node>,
    dir: PathBuf,
}

static SHARED: LazyLock<Cluster> = LazyLock::new(|| Cluster::start(3, 1));

impl Cluster {
    /// The test binary's cluster, started on first use.
    pub fn shared() -> &'static Cluster {
        &SHARED
    }

    /// A cluster client of this cluster (every node a seed), with the
    /// default settings.
    pub fn client(&self) -> redisson_lock::Client {
        super::connections(redisson_lock::Client::cluster_builder(self.urls()))
            .build()
            .expect("cluster client")
    }

    /// Starts `masters` masters with `replicas` replicas each and waits
    /// until every node reports `cluster_state:ok` and every master's
    /// replicas are listed by every node's `CLUSTER SLOTS`.
    pub fn start(masters: usize, replicas: usize) -> Cluster {
        let dir = super::test_dir(&format!("cluster-{}", uuid_like()));
        std::fs::create_dir_all(&dir).expect("create the cluster's directory");
        let count = masters * (1 + replicas);
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            nodes.push(start_node(&dir));
        }
        let cluster = Cluster { nodes, dir };
        cluster.spawn_reaper();
        let mut create = Command::new(redis_cli_binary());
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null());
        run_ok(&mut create, "redis-cli --cluster create");
        let ready = eventually(Duration::from_secs(30), || {
            cluster.nodes.iter().all(|node| {
                let info: String = node.try_cmd(&["CLUSTER", "INFO"]).unwrap_or_default();
                info.contains("cluster_state:ok")
                    && node.slots().is_some_and(|ranges| {
                        ranges.len() >= masters
                            && ranges.iter().all(|r| r.replicas.len() >= replicas)
                    })
            })
        });
        assert!(ready, "the cluster did not become ready within 30 s");
        cluster
    }

    /// Kills every node when this process exits, even by a panic or an
    /// abort: a `sh` loop polling this process's pid.
    // Never waited for on purpose: it must outlive this process.
    #[allow(clippy::zombie_processes)]
    fn spawn_reaper(&self) {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
             for f in '{dir}'/*/pid; do [ -f \"$f\" ] && kill -9 $(cat \"$f\") 2>/dev/null; done; \
             sleep 0.2; rm -rf '{dir}'",
            pid = std::process::id(),
            dir = self.dir.display()
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the cluster reaper");
    }

    /// `redis://127.0.0.1:<port>/` of every node: the seeds.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// A node that answers.
    pub fn any_node(&self) -> &Node {
        self.nodes
            .iter()
            .find(|node| node.try_cmd::<String>(&["PING"]).is_ok())
            .expect("some cluster node answers")
    }

    /// The node with `port`.
    pub fn node(&self, port: u16) -> &Node {
        self.nodes
            .iter()
            .find(|node| node.port == port)
            .expect("a node of this cluster")
    }

    /// `CLUSTER KEYSLOT key`, computed by the server.
    pub fn slot(&self, key: &str) -> u16 {
        self.any_node().cmd(&["CLUSTER", "KEYSLOT", key])
    }

    /// The master serving `slot`, as the answering node sees it.
    pub fn owner_of_slot(&self, slot: u16) -> &Node {
        let ranges = self.any_node().slots().expect("CLUSTER SLOTS");
        let range = ranges
            .iter()
            .find(|r| r.start <= slot && slot <= r.end)
            .expect("the slot is served");
        self.node(range.master)
    }

    /// The master serving `key`.
    pub fn owner(&self, key: &str) -> &Node {
        self.owner_of_slot(self.slot(key))
    }

    /// The masters serving slots now.
    pub fn masters(&self) -> Vec<&Node> {
        let mut ports: Vec<u16> = self
            .any_node()
            .slots()
            .expect("CLUSTER SLOTS")
            .iter()
            .map(|r| r.master)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports.into_iter().map(|port| self.node(port)).collect()
    }

    /// Names `prefix0`, `prefix1`, ... until one is served by each of
    /// `count` different masters.
    pub fn names_on_different_masters(&self, prefix: &str, count: usize) -> Vec<String> {
        let mut by_master: HashMap<u16, String> = HashMap::new();
        for i in 0..1000 {
            let name = format!("{prefix}{i}");
            by_master.entry(self.owner(&name).port).or_insert(name);
            if by_master.len() == count {
                break;
            }
        }
        assert_eq!(by_master.len(), count, "names on {count} masters");
        let mut names: Vec<String> = by_master.into_values().collect();
        names.sort();
        names
    }

    /// `FLUSHALL` on every master.
    pub fn flush(&self) {
        for master in self.masters() {
            let _: () = master.cmd(&["FLUSHALL"]);
        }
    }

    /// Moves `slot` from its master to `to` with keys and all
    /// ([`begin_migration`](Self::begin_migration), `MIGRATE` of every key,
    /// [`finish_migration`](Self::finish_migration)).
    pub fn migrate_slot(&self, slot: u16, to: &Node) {
        let from = self.begin_migration(slot, to);
        let slot_arg = slot.to_string();
        loop {
            let keys: Vec<String> = from.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_arg, "100"]);
            if keys.is_empty() {
                break;
            }
            let port = to.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: String = from.cmd(&args);
        }
        self.finish_migration(slot, to);
    }

    /// Marks `slot` IMPORTING on `to` and MIGRATING on its master, which it
    /// returns: until [`finish_migration`](Self::finish_migration), the
    /// master answers `ASK` for keys it no longer has, and `to` serves
    /// `ASKING` clients (`TRYAGAIN` for a multi-key command with keys
    /// missing).
    pub fn begin_migration(&self, slot: u16, to: &Node) -> &Node {
        let from = self.owner_of_slot(slot);
        assert_ne!(from.port, to.port, "the slot is already there");
        let slot_arg = slot.to_string();
        let _: () = to.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from.id()]);
        let _: () = from.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to.id()]);
        from
    }

    /// Assigns `slot` to `to` on every master and waits until every running
    /// node agrees.
    pub fn finish_migration(&self, slot: u16, to: &Node) {
        let slot_arg = slot.to_string();
        let to_id = to.id();
        let from = self.owner_of_slot(slot);
        for node in [to, from] {
            let _: () = node.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]);
        }
        for master in self.masters() {
            if master.port != to.port && master.port != from.port {
                let _: () = master.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id]);
            }
        }
        let agreed = eventually(Duration::from_secs(10), || {
            self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                n.slots().is_some_and(|ranges| {
                    ranges
                        .iter()
                        .any(|r| r.start <= slot && slot <= r.end && r.master == to.port)
                })
            })
        });
        assert!(agreed, "every node sees slot {slot} on {}", to.port);
    }
}

/// One range of `CLUSTER SLOTS`.
#[derive(Debug)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub master: u16,
    pub replicas: Vec<u16>,
}

impl Node {
    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child
            .lock()
            .expect("node lock")
            .as_ref()
            .expect("node running")
            .id()
    }

    pub fn is_running(&self) -> bool {
        self.child.lock().expect("node lock").is_some()
    }

    /// A plain connection with 5 s timeouts.
    pub fn con(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
        con.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(con)
    }

    /// One command on a fresh connection.
    pub fn try_cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.con()?)
    }

    /// One command on a fresh connection; panics on an error.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("{args:?} on {}: {e}", self.port))
    }

    /// Shard subscribers of `channel` on this node (`PUBSUB SHARDNUMSUB`).
    pub fn shard_subscribers(&self, channel: &str) -> i64 {
        let reply: (String, i64) = self.cmd(&["PUBSUB", "SHARDNUMSUB", channel]);
        reply.1
    }

    /// `CLUSTER MYID`.
    pub fn id(&self) -> String {
        self.cmd(&["CLUSTER", "MYID"])
    }

    /// This node's `CLUSTER SLOTS`, ports only; `None` if it does not answer.
    pub fn slots(&self) -> Option<Vec<SlotRange>> {
        let reply: redis::Value = self.try_cmd(&["CLUSTER", "SLOTS"]).ok()?;
        parse_slots(reply)
    }

    /// `kill -9` of the node.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().expect("node lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `kill -<sig>` to the node (`STOP` freezes it, `CONT` thaws it).
    pub fn signal(&self, sig: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} of node {} failed", self.port);
    }

    /// Starts a killed node again on its port, with its `nodes.conf`: it
    /// rejoins the cluster (as a replica, if its slots were failed over).
    pub fn restart(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = spawn_node(&self.dir, self.port, self.bus_port) {
                *self.child.lock().expect("node lock") = Some(child);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "could not restart node {}",
                self.port
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// Starts a node on a free port in a fresh directory under `dir`.
fn start_node(dir: &std::path::Path) -> Node {
    for _ in 0..10 {
        let (port, bus_port) = (free_port(), free_port());
        if port == bus_port {
            continue;
        }
        let node_dir = dir.join(port.to_string());
        std::fs::create_dir_all(&node_dir).expect("create the node's directory");
        if let Some(child) = spawn_node(&node_dir, port, bus_port) {
            return Node {
                port,
                bus_port,
                dir: node_dir,
                child: Mutex::new(Some(child)),
            };
        }
        let _ = std::fs::remove_dir_all(&node_dir);
    }
    panic!("could not start a cluster node on a free port");
}

/// Spawns a cluster-enabled `redis-server` on `port`; `None` if it did not
/// come up (most likely the port was taken).
fn spawn_node(dir: &std::path::Path, port: u16, bus_port: u16) -> Option<Child> {
    let port_arg = port.to_string();
    let bus_arg = bus_port.to_string();
    let child = Command::new(redis_server_binary())
        .args([
            "--port",
            &port_arg,
            "--cluster-port",
            &bus_arg,
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ])
        .args([
            "--cluster-node-timeout",
            "2000",
            "--repl-diskless-sync-delay",
            "0",
        ])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--protected-mode", "yes", "--loglevel", "warning"])
        .arg("--dir")
        .arg(dir)
        .arg("--pidfile")
        .arg(dir.join("pid"))
        .arg("--logfile")
        .arg(dir.join("log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run redis-server");
    came_up(child, port)
}

/// The `calls` counter of `INFO commandstats` for `command` on `node`.
pub fn calls(node: &Node, command: &str) -> u64 {
    let info: String = node.cmd(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next()?.trim().parse().ok())
        .unwrap_or(0)
}

/// A `CLUSTER SLOTS` reply, ports only; `None` if it does not parse.
pub fn parse_slots(reply: redis::Value) -> Option<Vec<SlotRange>> {
    let ranges: Vec<Vec<redis::Value>> = redis::from_redis_value(reply).ok()?;
    let mut out = Vec::new();
    for range in ranges {
        let start: u16 = redis::from_redis_value(range.first()?.clone()).ok()?;
        let end: u16 = redis::from_redis_value(range.get(1)?.clone()).ok()?;
        let ports: Vec<u16> = range[2..]
            .iter()
            .filter_map(|node| {
                let node: Vec<redis::Value> = redis::from_redis_value(node.clone()).ok()?;
                redis::from_redis_value(node.get(1)?.clone()).ok()
            })
            .collect();
        out.push(SlotRange {
            start,
            end,
            master: *ports.first()?,
            replicas: ports[1..].to_vec(),
        });
    }
    Some(out)
}
