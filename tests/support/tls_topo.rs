//! TLS-only topologies for `rediss://` tests: a Redis Cluster (3 masters,
//! one replica each) and a Sentinel setup (a master, one replica, three
//! sentinels). Every node has `port 0` and a `tls-port` (no plain TCP port
//! at all), with the certificates of one [`Certs`]; nodes talk TLS to each
//! other too (`tls-replication`, `tls-cluster`). The tests inspect them
//! through TLS connections ([`tls_con`]).
//!
//! Each is started once per test binary. Statics are never dropped, so a
//! reaper shell started first waits for the test process to end (however it
//! ends) and kills every pid listed in the topology's pid file; the
//! directories are named by `super::test_dir` (`redisson-lock-test-<run>-*`)
//! for scripts/lib.sh's `reap_test_servers` as well.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::tls::Certs;
use super::{
    NODE_ARGS, eventually, free_port, listens_on, redis_cli_binary, redis_server_binary, run_ok,
    topology_dir,
};

pub const MASTER_NAME: &str = "tlsmaster";

/// A TLS connection to `127.0.0.1:port`, trusting the test CA, with 5 s
/// timeouts.
pub fn tls_con(certs: &Certs, port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::build_with_tls(
        format!("rediss://127.0.0.1:{port}/"),
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(certs.pem("ca.crt")),
        },
    )?;
    let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    con.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(con)
}

/// One command on a fresh TLS connection.
pub fn tls_cmd<T: redis::FromRedisValue>(
    certs: &Certs,
    port: u16,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(&mut tls_con(certs, port)?)
}

/// `CLIENT LIST TYPE pubsub` of the node at `port`, one line per client.
pub fn pubsub_clients(certs: &Certs, port: u16) -> Vec<String> {
    let list: String =
        tls_cmd(certs, port, &["CLIENT", "LIST", "TYPE", "pubsub"]).expect("CLIENT LIST");
    list.lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The TLS settings every node gets.
fn tls_args(certs: &Certs, port: u16, dir: &Path) -> Vec<String> {
    let path = |file: &str| certs.path(file).display().to_string();
    [
        "--port",
        "0",
        "--tls-port",
        &port.to_string(),
        "--tls-cert-file",
        &path("node.crt"),
        "--tls-key-file",
        &path("node.key"),
        "--tls-ca-cert-file",
        &path("ca.crt"),
        "--tls-auth-clients",
        "no",
        "--tls-replication",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--dir",
        &dir.display().to_string(),
    ]
    .iter()
    .chain(&NODE_ARGS)
    .map(|s| s.to_string())
    .collect()
}

/// A topology's directory, pid file and reaper.
struct Processes {
    dir: PathBuf,
    children: Vec<Child>,
}

impl Processes {
    fn new(kind: &str, certs: &Certs) -> Processes {
        let (dir, reaper) = topology_dir(kind, &[&certs.dir]);
        Processes {
            dir,
            children: vec![reaper],
        }
    }

    /// Starts `redis-server` with `args(port, node_dir)` on a free port in
    /// `dir/name`, retried on another port if it does not come up; the port.
    fn spawn(&mut self, name: &str, args: impl Fn(u16, &Path) -> Vec<String>) -> u16 {
        let node_dir = self.dir.join(name);
        std::fs::create_dir_all(&node_dir).expect("node dir");
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(redis_server_binary())
                .args(args(port, &node_dir))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .current_dir(&node_dir)
                .spawn()
                .expect("run redis-server");
            {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(self.dir.join("pids"))
                    .expect("pid file");
                writeln!(file, "{}", child.id()).expect("record a pid");
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if listens_on(child.id(), port) {
                    self.children.push(child);
                    return port;
                }
                thread::sleep(Duration::from_millis(5));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start {name} on a free port");
    }
}

/// A TLS-only Redis Cluster: 3 masters, a replica each.
pub struct TlsCluster {
    pub certs: Certs,
    /// The nodes' TLS ports (their only TCP ports).
    pub ports: Vec<u16>,
    _processes: Processes,
}

/// One range of `CLUSTER SLOTS`: start, end, master port, replica ports.
pub type Range = (u16, u16, u16, Vec<u16>);

impl TlsCluster {
    pub fn start() -> TlsCluster {
        let started = Instant::now();
        let certs = Certs::make();
        let mut processes = Processes::new("tls-cluster", &certs);
        let mut ports = Vec::new();
        for i in 0..6 {
            let port = processes.spawn(&format!("node{i}"), |port, dir| {
                let mut args = tls_args(&certs, port, dir);
                let bus = free_port().to_string();
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "2000",
                        "--cluster-port",
                        &bus,
                        "--tls-cluster",
                        "yes",
                    ]
                    .map(str::to_owned),
                );
                args
            });
            ports.push(port);
        }
        // Bounded: it waits for the nodes to join for as long as it takes.
        let mut create = Command::new("timeout");
        create
            .arg("60")
            .arg(redis_cli_binary())
            .args(["--tls", "--cacert"])
            .arg(certs.path("ca.crt"))
            .args(["--cluster", "create"]);
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null());
        run_ok(&mut create, "redis-cli --tls --cluster create");
        let cluster = TlsCluster {
            certs,
            ports,
            _processes: processes,
        };
        let ready = eventually(Duration::from_secs(30), || {
            cluster.ports.iter().all(|&port| {
                let info: String =
                    tls_cmd(&cluster.certs, port, &["CLUSTER", "INFO"]).unwrap_or_default();
                info.contains("cluster_state:ok")
                    && cluster.slots_at(port).is_some_and(|ranges| {
                        ranges.len() >= 3 && ranges.iter().all(|r| r.3.len() == 1)
                    })
            })
        });
        assert!(ready, "the TLS cluster did not become ready within 30 s");
        eprintln!("TLS cluster up in {:?}", started.elapsed());
        cluster
    }

    /// `rediss://127.0.0.1:<port>/` of every node: the seeds.
    pub fn urls(&self) -> Vec<String> {
        super::local_urls("rediss", &self.ports)
    }

    /// `CLUSTER SLOTS` as the node at `port` sees it, ports only.
    pub fn slots_at(&self, port: u16) -> Option<Vec<Range>> {
        let reply: redis::Value = tls_cmd(&self.certs, port, &["CLUSTER", "SLOTS"]).ok()?;
        let ranges = super::cluster::parse_slots(reply)?;
        Some(
            ranges
                .into_iter()
                .map(|r| (r.start, r.end, r.master, r.replicas))
                .collect(),
        )
    }

    /// `CLUSTER SLOTS` of the first node.
    pub fn slots(&self) -> Vec<Range> {
        self.slots_at(self.ports[0]).expect("CLUSTER SLOTS")
    }

    /// The masters' ports, sorted.
    pub fn masters(&self) -> Vec<u16> {
        let mut masters: Vec<u16> = self.slots().iter().map(|r| r.2).collect();
        masters.sort_unstable();
        masters.dedup();
        masters
    }

    /// The master serving `key`.
    pub fn owner(&self, key: &str) -> u16 {
        let slot = key_slot(key);
        self.slots()
            .iter()
            .find(|r| r.0 <= slot && slot <= r.1)
            .map(|r| r.2)
            .expect("every slot is served")
    }

    /// `FLUSHALL` on every master.
    pub fn flush(&self) {
        for master in self.masters() {
            let () = tls_cmd(&self.certs, master, &["FLUSHALL"]).expect("FLUSHALL");
        }
    }
}

/// Redis Cluster's key slot: CRC16 (XMODEM) of the key, or of its hash tag.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let close = bytes[open + 1..].iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &bytes[open + 1..open + 1 + close])
        })
        .unwrap_or(bytes);
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// A TLS-only Sentinel setup: a master, one replica, three sentinels
/// (quorum 2).
pub struct TlsSentinels {
    pub certs: Certs,
    pub data_ports: Vec<u16>,
    pub sentinel_ports: Vec<u16>,
    _processes: Processes,
}

impl TlsSentinels {
    pub fn start() -> TlsSentinels {
        let started = Instant::now();
        let certs = Certs::make();
        let mut processes = Processes::new("tls-sentinel", &certs);
        let master = processes.spawn("data0", |port, dir| tls_args(&certs, port, dir));
        let replica = processes.spawn("data1", |port, dir| {
            let mut args = tls_args(&certs, port, dir);
            args.extend(["--replicaof".into(), "127.0.0.1".into(), master.to_string()]);
            args
        });
        let mut sentinel_ports = Vec::new();
        for i in 0..3 {
            let port = processes.spawn(&format!("sentinel{i}"), |port, dir| {
                let conf = dir.join("sentinel.conf");
                let path = |file: &str| certs.path(file).display().to_string();
                std::fs::write(
                    &conf,
                    format!(
                        "port 0\ntls-port {port}\nbind 127.0.0.1\ndir {dir}\nloglevel warning\n\
                         tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n\
                         tls-auth-clients no\ntls-replication yes\n\
                         sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                         sentinel down-after-milliseconds {MASTER_NAME} 5000\n",
                        dir = dir.display(),
                        cert = path("node.crt"),
                        key = path("node.key"),
                        ca = path("ca.crt"),
                    ),
                )
                .expect("write sentinel.conf");
                vec![conf.display().to_string(), "--sentinel".to_owned()]
            });
            sentinel_ports.push(port);
        }
        let setup = TlsSentinels {
            certs,
            data_ports: vec![master, replica],
            sentinel_ports,
            _processes: processes,
        };
        // Every sentinel names the master and knows the replica and the
        // other two sentinels (all learnt over TLS), and the replica is
        // online: the master's INFO says so.
        let stable = eventually(Duration::from_secs(30), || {
            let info: String =
                tls_cmd(&setup.certs, master, &["INFO", "replication"]).unwrap_or_default();
            info.contains("connected_slaves:1")
                && info.contains("state=online")
                && setup.sentinel_ports.iter().all(|&port| {
                    let addr: Option<(String, u16)> = tls_cmd(
                        &setup.certs,
                        port,
                        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
                    )
                    .ok()
                    .flatten();
                    let count = |what: &str| {
                        tls_cmd::<Vec<redis::Value>>(
                            &setup.certs,
                            port,
                            &["SENTINEL", what, MASTER_NAME],
                        )
                        .map_or(0, |list| list.len())
                    };
                    addr.is_some_and(|(_, p)| p == master)
                        && count("REPLICAS") == 1
                        && count("SENTINELS") == 2
                })
        });
        assert!(stable, "the TLS Sentinel setup did not settle within 30 s");
        eprintln!("TLS Sentinel setup up in {:?}", started.elapsed());
        setup
    }

    /// `rediss://127.0.0.1:<port>/` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        super::local_urls("rediss", &self.sentinel_ports)
    }

    pub fn master(&self) -> u16 {
        self.data_ports[0]
    }

    pub fn flush(&self) {
        let () = tls_cmd(&self.certs, self.master(), &["FLUSHALL"]).expect("FLUSHALL");
    }
}
