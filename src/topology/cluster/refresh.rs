//! Reading the slot table again: which nodes to ask, in which order, and
//! how long to wait for each. A failed or frozen former master must not
//! stall every refresh: the node that answered last is asked first, a node
//! that just failed is asked last, and a topology read waits at most
//! [`TOPOLOGY_TIMEOUT_MAX`] to connect and as long for its reply.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::table::Table;
use super::{State, node_addr};
use crate::error::{Error, Result};
use crate::net::connection::Connector;

/// The longest a topology read waits to connect, and for its reply: a node
/// that does not answer within it is taken for gone, and the next is asked.
const TOPOLOGY_TIMEOUT_MAX: Duration = Duration::from_secs(2);
/// How long a node whose topology read failed is asked only after every
/// other node.
const FAILED_FOR: Duration = Duration::from_secs(10);

/// What refreshes remember between them.
#[derive(Default)]
pub(super) struct Memory {
    /// The node whose table was installed last.
    last_answered: Option<Arc<str>>,
    /// Nodes whose topology read failed, and when.
    failed: HashMap<Arc<str>, Instant>,
}

impl State {
    /// Reads `CLUSTER SLOTS` from the node that answered last, else a known
    /// master, else a seed (nodes that failed in the last 10 s last of
    /// all), and installs the first complete table. One round trip per node
    /// asked (on an idle pooled connection, else on a new one), each
    /// bounded by 2 s (or the connect and response timeouts, if shorter).
    pub(super) fn refresh(&self) -> Result<()> {
        *self.last_refresh.lock() = Instant::now();
        let mut last_error = None;
        for addr in self.candidates() {
            let result = self.read_table(&addr).and_then(|table| {
                if table.is_complete() {
                    Ok(table)
                } else {
                    Err(Error::Unavailable {
                        reason: format!("{addr} reports slots without a master"),
                    })
                }
            });
            match result {
                Ok(table) => {
                    {
                        let mut memory = self.memory.lock();
                        memory.failed.remove(&addr);
                        memory.last_answered = Some(addr);
                    }
                    // Pools of nodes that serve no slot any more (demoted,
                    // gone) are closed once their connections are returned.
                    let masters: Vec<Arc<str>> = table.masters().cloned().collect();
                    self.pools.lock().retain(|addr, _| masters.contains(addr));
                    *self.table.write() = Arc::new(table);
                    self.notify(&masters);
                    return Ok(());
                }
                Err(e) => {
                    log::debug!("redisson-lock: no slot table from {addr}: {e}");
                    self.memory.lock().failed.insert(addr, Instant::now());
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Unavailable {
            reason: "no cluster node to ask for the slot table".into(),
        }))
    }

    /// The nodes to ask, in order: the one that answered last, the known
    /// masters, the seeds, each once; those that failed recently last.
    fn candidates(&self) -> Vec<Arc<str>> {
        let known: Vec<Arc<str>> = self.table.read().masters().cloned().collect();
        let seeds = self.seeds.iter().filter_map(|seed| {
            node_addr(seed).map(|(host, port)| Arc::<str>::from(format!("{host}:{port}")))
        });
        let mut memory = self.memory.lock();
        let now = Instant::now();
        memory
            .failed
            .retain(|_, at| now.saturating_duration_since(*at) < FAILED_FOR);
        let mut order: Vec<Arc<str>> = Vec::new();
        for addr in memory
            .last_answered
            .iter()
            .cloned()
            .chain(known)
            .chain(seeds)
        {
            if !order.contains(&addr) {
                order.push(addr);
            }
        }
        // Stable: the order above holds within each group.
        order.sort_by_key(|addr| memory.failed.contains_key(addr));
        order
    }

    /// `CLUSTER SLOTS` from the node at `addr`: on an idle pooled
    /// connection if it is a master with one, else on a connection of its
    /// own (a seed may be a replica, whose pool would only hold an idle
    /// connection). Waits at most the topology timeout to connect and as
    /// long for the reply.
    fn read_table(&self, addr: &Arc<str>) -> Result<Table> {
        let connect_timeout = self.connect_timeout.min(TOPOLOGY_TIMEOUT_MAX);
        let reply_timeout = self.response_timeout.min(TOPOLOGY_TIMEOUT_MAX);
        let slots = redis::cmd("CLUSTER").arg("SLOTS").clone();
        let host = addr.rsplit_once(':').map_or(&**addr, |(host, _)| host);
        let pool = self.pools.lock().get(addr).cloned();
        if let Some(mut con) = pool.as_ref().and_then(|pool| pool.try_get_idle()) {
            let reply = con
                .send_packed(&slots.get_packed_command())
                .and_then(|()| con.recv_within(reply_timeout));
            match reply {
                Ok(Value::ServerError(e)) => return Err(Error::Redis(e.into())),
                Ok(reply) => return Table::parse(reply, host),
                // A silent node: no second wait on a new connection.
                Err(e) if e.is_timeout() => return Err(e.into()),
                // An idle connection that dropped meanwhile (a restart, an
                // idle timeout): the node may answer a new one.
                Err(_) => con.discard(),
            }
        }
        let connector = Connector::new(self.node_endpoint(addr)?, connect_timeout, reply_timeout)?;
        let mut con = connector
            .open_pooled()
            .map_err(|e| connector.connect_error(e))?;
        Table::parse(slots.query(&mut con)?, host)
    }
}
