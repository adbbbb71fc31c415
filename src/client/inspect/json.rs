//! The versioned JSON shape of [`LockInfo`] and [`LockSummary`] (docs/operating.md,
//! "Lock info JSON"), with the `serde` feature.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::*;

fn kind_name(kind: LockKind) -> (&'static str, Option<&'static str>) {
    match kind {
        LockKind::Unknown => ("unknown", None),
        LockKind::Reentrant => ("reentrant", None),
        LockKind::Fair => ("fair", None),
        LockKind::Fenced => ("fenced", None),
        LockKind::ReadWrite { mode: RwMode::Read } => ("read_write", Some("read")),
        LockKind::ReadWrite {
            mode: RwMode::Write,
        } => ("read_write", Some("write")),
        LockKind::Counter { .. } => ("counter", None),
        LockKind::PermitExpirableSemaphore { .. } => ("permit_expirable_semaphore", None),
    }
}

fn counter(kind: LockKind) -> Option<i64> {
    match kind {
        LockKind::Counter { value } => Some(value),
        LockKind::PermitExpirableSemaphore { available } => Some(available),
        _ => None,
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for PermitInfo {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("PermitInfo", 4)?;
        st.serialize_field("id", &self.id.to_string())?;
        st.serialize_field("expiry_ms", &self.expiry_ms)?;
        st.serialize_field("remaining_ms", &self.remaining_ms)?;
        st.serialize_field("stored_as_hex", &self.stored_as_hex)?;
        st.end()
    }
}

fn ms(d: Option<Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for Holder {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Holder", 7)?;
        st.serialize_field("field", &self.field())?;
        st.serialize_field("client_id", &self.client_id)?;
        st.serialize_field("thread_id", &self.thread_id)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field(
            "side",
            match self.side {
                HolderSide::Exclusive => "exclusive",
                HolderSide::Read => "read",
                HolderSide::Write => "write",
            },
        )?;
        let markers: Vec<Option<u64>> = self.marker_ttls.iter().map(|t| ms(*t)).collect();
        st.serialize_field("marker_ttls_ms", &markers)?;
        st.serialize_field("lacks_live_marker", &self.lacks_live_marker())?;
        st.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for Waiter {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Waiter", 5)?;
        st.serialize_field("field", &self.field())?;
        st.serialize_field("client_id", &self.client_id)?;
        st.serialize_field("thread_id", &self.thread_id)?;
        st.serialize_field("deadline_ms", &self.deadline_ms)?;
        st.serialize_field("remaining_ms", &self.remaining_ms)?;
        st.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for LockInfo {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let (kind, mode) = kind_name(self.kind);
        let mut st = s.serialize_struct("LockInfo", 13)?;
        st.serialize_field("version", &LOCK_INFO_JSON_VERSION)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("locked", &self.locked)?;
        st.serialize_field("kind", kind)?;
        st.serialize_field("mode", &mode)?;
        st.serialize_field("ttl_ms", &ms(self.ttl))?;
        st.serialize_field("persistent", &self.persistent)?;
        st.serialize_field("holders", &self.holders)?;
        st.serialize_field("queue", &self.queue)?;
        st.serialize_field("token", &self.token)?;
        st.serialize_field("counter", &counter(self.kind))?;
        st.serialize_field("permits", &self.permits)?;
        st.serialize_field("server_time_ms", &self.server_time_ms)?;
        st.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for LockSummary {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let (kind, mode) = kind_name(self.kind);
        let mut st = s.serialize_struct("LockSummary", 8)?;
        st.serialize_field("version", &LOCK_INFO_JSON_VERSION)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("kind", kind)?;
        st.serialize_field("mode", &mode)?;
        st.serialize_field("locked", &self.locked)?;
        st.serialize_field("holders", &self.holders)?;
        st.serialize_field("ttl_ms", &ms(self.ttl))?;
        st.serialize_field("counter", &counter(self.kind))?;
        st.end()
    }
}
