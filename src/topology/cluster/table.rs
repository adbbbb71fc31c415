//! The slot table: which master serves each of the 16384 slots, read from
//! `CLUSTER SLOTS`.

use std::sync::Arc;

use redis::Value;

use super::slot::SLOTS;
use crate::error::{Error, Result};

/// No master is known for a slot.
const NONE: u16 = u16::MAX;

/// A snapshot of the cluster's slot assignment. Immutable: a refresh
/// builds a new one, a `MOVED` copies and patches it.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    /// Per slot, an index into `masters`, or [`NONE`].
    owner: Vec<u16>,
    /// Masters as `host:port`.
    masters: Vec<Arc<str>>,
}

impl Table {
    /// A table with no slot assigned.
    pub fn empty() -> Table {
        Table {
            owner: vec![NONE; usize::from(SLOTS)],
            masters: Vec::new(),
        }
    }

    /// Parses a `CLUSTER SLOTS` reply from the node at `queried_host`
    /// (whose name replaces a null, empty or `?` host in the reply: Redis
    /// sends an empty or `?` host for a node that does not know its own
    /// address, and a null one under `cluster-preferred-endpoint-type
    /// unknown-endpoint`, meaning "the node you asked").
    pub fn parse(reply: Value, queried_host: &str) -> Result<Table> {
        let bad = |what: &str| Error::UnexpectedReply(format!("CLUSTER SLOTS: {what}"));
        let Value::Array(ranges) = reply else {
            return Err(bad("not an array"));
        };
        let mut table = Table::empty();
        for range in ranges {
            let Value::Array(fields) = range else {
                return Err(bad("a range is not an array"));
            };
            let mut fields = fields.into_iter();
            let (Some(start), Some(end), Some(master)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(bad("a range has fewer than 3 fields"));
            };
            let start = slot_number(start).ok_or_else(|| bad("bad start slot"))?;
            let end = slot_number(end).ok_or_else(|| bad("bad end slot"))?;
            if start > end {
                return Err(bad("a range ends before it starts"));
            }
            let master = node_addr(master, queried_host).ok_or_else(|| bad("bad master"))?;
            // The replicas that follow are not used: lock commands go to masters.
            let index = table.master_index(master);
            for slot in start..=end {
                table.owner[usize::from(slot)] = index;
            }
        }
        Ok(table)
    }

    /// The index of `addr` among the masters, added if new.
    fn master_index(&mut self, addr: Arc<str>) -> u16 {
        if let Some(i) = self.masters.iter().position(|m| *m == addr) {
            return u16::try_from(i).unwrap_or(NONE);
        }
        self.masters.push(addr);
        u16::try_from(self.masters.len() - 1).unwrap_or(NONE)
    }

    /// The master serving `slot`, if any is known.
    pub fn owner(&self, slot: u16) -> Option<&Arc<str>> {
        let index = *self.owner.get(usize::from(slot))?;
        self.masters.get(usize::from(index))
    }

    /// This table with `slot` served by `addr` (a `MOVED` reply's news).
    pub fn with_move(&self, slot: u16, addr: &str) -> Table {
        let mut table = self.clone();
        let index = table.master_index(Arc::from(addr));
        if let Some(owner) = table.owner.get_mut(usize::from(slot)) {
            *owner = index;
        }
        table
    }

    /// Every master that serves at least one slot.
    pub fn masters(&self) -> impl Iterator<Item = &Arc<str>> {
        self.masters
            .iter()
            .enumerate()
            .filter(|(i, _)| self.owner.iter().any(|&o| usize::from(o) == *i))
            .map(|(_, m)| m)
    }

    /// Whether every slot has a master.
    pub fn is_complete(&self) -> bool {
        !self.owner.contains(&NONE)
    }
}

fn slot_number(value: Value) -> Option<u16> {
    match value {
        Value::Int(n) => u16::try_from(n).ok().filter(|&n| n < SLOTS),
        _ => None,
    }
}

/// `host:port` of a node entry `[host, port, id, ...]`.
fn node_addr(value: Value, queried_host: &str) -> Option<Arc<str>> {
    let Value::Array(fields) = value else {
        return None;
    };
    let mut fields = fields.into_iter();
    let host: String = match fields.next()? {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok()?,
        Value::SimpleString(s) => s,
        Value::Nil => String::new(),
        _ => return None,
    };
    let port = match fields.next()? {
        Value::Int(port) => u16::try_from(port).ok()?,
        _ => return None,
    };
    let host = if host.is_empty() || host == "?" {
        queried_host
    } else {
        &host
    };
    Some(Arc::from(format!("{host}:{port}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn parses_ranges_masters_and_replicas() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node("10.0.0.1", 7000),
                node("10.0.0.2", 7001),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node("", 7002)]),
        ]);
        let table = Table::parse(reply, "seed").expect("parsed");
        assert_eq!(table.owner(0).map(|a| &**a), Some("10.0.0.1:7000"));
        assert_eq!(table.owner(8191).map(|a| &**a), Some("10.0.0.1:7000"));
        assert_eq!(table.owner(8192).map(|a| &**a), Some("seed:7002"));
        assert!(table.is_complete());
        let moved = table.with_move(5, "10.0.0.9:7009");
        assert_eq!(moved.owner(5).map(|a| &**a), Some("10.0.0.9:7009"));
        assert_eq!(moved.owner(6).map(|a| &**a), Some("10.0.0.1:7000"));
        assert_eq!(moved.masters().count(), 3);
    }

    #[test]
    fn a_null_or_empty_host_is_the_queried_node() {
        let null_host = Value::Array(vec![Value::Nil, Value::Int(7001), Value::Nil]);
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(99), null_host]),
            Value::Array(vec![Value::Int(100), Value::Int(199), node("", 7002)]),
            Value::Array(vec![Value::Int(200), Value::Int(16383), node("?", 7003)]),
        ]);
        let table = Table::parse(reply, "10.0.0.5").expect("parsed");
        assert_eq!(table.owner(0).map(|a| &**a), Some("10.0.0.5:7001"));
        assert_eq!(table.owner(150).map(|a| &**a), Some("10.0.0.5:7002"));
        assert_eq!(table.owner(9000).map(|a| &**a), Some("10.0.0.5:7003"));
        assert!(table.is_complete());
    }

    #[test]
    fn rejects_garbage() {
        assert!(Table::parse(Value::Int(1), "h").is_err());
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Int(9),
            Value::Int(3),
            node("h", 1),
        ])]);
        assert!(Table::parse(reply, "h").is_err());
        let partial = Table::parse(
            Value::Array(vec![Value::Array(vec![
                Value::Int(0),
                Value::Int(3),
                node("h", 1),
            ])]),
            "h",
        )
        .expect("parsed");
        assert!(!partial.is_complete());
        assert!(partial.owner(4).is_none());
    }
}
