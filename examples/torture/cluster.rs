//! The cluster of a `--cluster` run: 3 masters + 3 replicas of
//! `redis-server` on free loopback ports (never 6379), without persistence,
//! each in its own directory under `--cluster-dir` with its `nodes.conf`,
//! pid file and log. The supervisor owns the processes: it kills a master
//! with SIGKILL and starts it again on its port with its `nodes.conf`, so
//! that it rejoins the cluster (as a replica of its promoted replica).
//! Dropping [`Nodes`] kills every node; `scripts/torture.sh` also kills the
//! pids in the pid files when it exits, should this program die first.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::ms;

pub const MASTERS: usize = 3;
/// `cluster-node-timeout` (ms): a killed master is flagged failed after it,
/// and its replica promoted about a second later. Far above the longest
/// pause or stop of a node (a third of the lease), so that nothing but the
/// chaos's own kills fails a master over.
pub const NODE_TIMEOUT_MS: u64 = 2000;

pub struct Node {
    pub port: u16,
    bus_port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// One range of `CLUSTER SLOTS`, as ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u16,
    pub end: u16,
    pub master: u16,
    pub replicas: Vec<u16>,
}

pub struct Nodes {
    pub nodes: Vec<Node>,
}

pub fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// A fresh connection with short timeouts (the node may be dead or frozen).
pub fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let con = redis::Client::open(url(port))?.get_connection_with_timeout(ms(1000))?;
    con.set_read_timeout(Some(ms(3000)))?;
    con.set_write_timeout(Some(ms(3000)))?;
    Ok(con)
}

/// One command on a fresh connection to the node at `port`.
pub fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(&mut connect(port)?)
}

/// A field of `INFO replication` on the node at `port`.
pub fn replication_field(port: u16, field: &str) -> Option<String> {
    let info: String = query(port, &["INFO", "replication"]).ok()?;
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|value| value.trim().to_owned())
}

/// Whether the node at `port` is a replica whose link to its master is up.
pub fn replica_in_sync(port: u16) -> bool {
    replication_field(port, "role").as_deref() == Some("slave")
        && replication_field(port, "master_link_status").as_deref() == Some("up")
}

/// `CLUSTER SLOTS` of the node at `port`, sorted; `None` if it does not
/// answer or some slot has no master.
pub fn slots_of(port: u16) -> Option<Vec<Range>> {
    let ranges: Vec<Vec<redis::Value>> = query(port, &["CLUSTER", "SLOTS"]).ok()?;
    let mut out = Vec::new();
    for range in ranges {
        let start: u16 = redis::from_redis_value(range.first()?.clone()).ok()?;
        let end: u16 = redis::from_redis_value(range.get(1)?.clone()).ok()?;
        let mut ports = Vec::new();
        for node in range.get(2..)? {
            let node: Vec<redis::Value> = redis::from_redis_value(node.clone()).ok()?;
            ports.push(redis::from_redis_value::<u16>(node.get(1)?.clone()).ok()?);
        }
        out.push(Range {
            start,
            end,
            master: *ports.first()?,
            replicas: ports[1..].to_vec(),
        });
    }
    out.sort_by_key(|r| r.start);
    let covered: u32 = out.iter().map(|r| u32::from(r.end - r.start) + 1).sum();
    (covered == 16384).then_some(out)
}

impl Nodes {
    /// Starts `MASTERS` × 2 nodes in `dir`, creates the cluster with
    /// `redis-cli --cluster create` (one replica per master) and waits until
    /// every node reports `cluster_state:ok`, the same slot table with a
    /// replica per range, and every replica's link is up.
    pub fn start(dir: &Path) -> std::io::Result<Nodes> {
        std::fs::create_dir_all(dir)?;
        let mut nodes = Nodes { nodes: Vec::new() };
        for _ in 0..MASTERS * 2 {
            nodes.nodes.push(start_node(dir)?);
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for node in &nodes.nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let output = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !output.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&output.stdout)
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !nodes.settled() {
            if Instant::now() > deadline {
                return Err(std::io::Error::other(
                    "the cluster did not become ready within 30 s",
                ));
            }
            thread::sleep(ms(100));
        }
        Ok(nodes)
    }

    /// Every running node says `cluster_state:ok` and reports the same
    /// slot table, with one replica per range whose link is up.
    pub fn settled(&self) -> bool {
        let mut tables = Vec::new();
        for port in self.running() {
            let state: String = query(port, &["CLUSTER", "INFO"]).unwrap_or_default();
            if !state.contains("cluster_state:ok") {
                return false;
            }
            match slots_of(port) {
                Some(table) => tables.push(table),
                None => return false,
            }
        }
        let Some(first) = tables.first() else {
            return false;
        };
        tables.iter().all(|t| t == first)
            && first.len() >= MASTERS
            && first
                .iter()
                .all(|r| r.replicas.len() == 1 && replica_in_sync(r.replicas[0]))
    }

    /// Ports of the nodes running now.
    pub fn running(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect()
    }

    pub fn pid(&self, port: u16) -> Option<u32> {
        self.node(port)?.child.as_ref().map(Child::id)
    }

    fn node(&self, port: u16) -> Option<&Node> {
        self.nodes.iter().find(|n| n.port == port)
    }

    /// The slot table as the first running node that answers sees it.
    pub fn slots(&self) -> Option<Vec<Range>> {
        self.running().into_iter().find_map(slots_of)
    }

    /// The range serving `slot` in `table`.
    pub fn range_of(table: &[Range], slot: u16) -> Option<&Range> {
        table.iter().find(|r| r.start <= slot && slot <= r.end)
    }

    /// `kill -9` of the node at `port`, reaped at once.
    pub fn kill(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port)
            && let Some(mut child) = node.child.take()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed node again on its ports with its `nodes.conf`.
    pub fn restart(&mut self, port: u16) -> std::io::Result<()> {
        let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) else {
            return Err(std::io::Error::other(format!("no node on port {port}")));
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = spawn_node(&node.dir, node.port, node.bus_port)? {
                node.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "could not restart the node on port {port}"
                )));
            }
            thread::sleep(ms(100));
        }
    }

    /// Runs `op` on a fresh connection to the master serving `key`, read
    /// again from `CLUSTER SLOTS` on every attempt; tries for up to 30 s
    /// (a failover in progress), then gives up with `None`.
    pub fn on_key<T>(
        &self,
        key: &str,
        mut op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        let slot = redisson_lock::key_slot(key.as_bytes());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let owner = self
                .slots()
                .and_then(|table| Some(Nodes::range_of(&table, slot)?.master));
            if let Some(port) = owner
                && let Ok(value) = connect(port).and_then(|mut con| op(&mut con))
            {
                return Some(value);
            }
            if Instant::now() > deadline {
                eprintln!("torture: no cluster master answered for {key} within 30 s");
                return None;
            }
            thread::sleep(ms(100));
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if port != 6379 {
            return Ok(port);
        }
    }
}

/// Starts a node on free ports in a new directory under `dir`.
fn start_node(dir: &Path) -> std::io::Result<Node> {
    for _ in 0..10 {
        let (port, bus_port) = (free_port()?, free_port()?);
        if port == bus_port {
            continue;
        }
        let node_dir = dir.join(port.to_string());
        std::fs::create_dir_all(&node_dir)?;
        if let Some(child) = spawn_node(&node_dir, port, bus_port)? {
            return Ok(Node {
                port,
                bus_port,
                dir: node_dir,
                child: Some(child),
            });
        }
        let _ = std::fs::remove_dir_all(&node_dir);
    }
    Err(std::io::Error::other(
        "could not start a cluster node on a free port",
    ))
}

/// Spawns a cluster-enabled `redis-server` on `port` and waits until that
/// very process listens on it; `None` if it exits or does not come up
/// within 10 s (most likely the port was taken meanwhile).
fn spawn_node(dir: &Path, port: u16, bus_port: u16) -> std::io::Result<Option<Child>> {
    let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let (port_arg, bus_arg) = (port.to_string(), bus_port.to_string());
    let node_timeout = NODE_TIMEOUT_MS.to_string();
    let mut child = Command::new(binary)
        .args(["--port", &port_arg, "--cluster-port", &bus_arg])
        .args(["--bind", "127.0.0.1", "--protected-mode", "yes"])
        .args(["--cluster-enabled", "yes"])
        .args(["--cluster-config-file", "nodes.conf"])
        .args(["--cluster-node-timeout", &node_timeout])
        // A replica whose master died always runs for election, however
        // long ago it last heard from it.
        .args(["--cluster-replica-validity-factor", "0"])
        .args(["--repl-diskless-sync", "yes"])
        .args(["--repl-diskless-sync-delay", "0"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--loglevel", "notice"])
        .arg("--dir")
        .arg(dir)
        .arg("--pidfile")
        .arg(dir.join("pid"))
        .arg("--logfile")
        .arg(dir.join("log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(None);
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() && listens_on(child.id(), port) {
            return Ok(Some(child));
        }
        thread::sleep(ms(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(None)
}

/// Whether process `pid` owns the socket listening on 127.0.0.1:`port`
/// (another process may have taken the port between the pick and the bind):
/// the listening socket's inode, from `/proc/net/tcp`, among its fds.
fn listens_on(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return true; // not Linux: trust the connect
    };
    let local = format!("0100007F:{port:04X}");
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A"))
                .then(|| format!("socket:[{}]", f.get(9).copied().unwrap_or_default()))
        })
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    })
}
