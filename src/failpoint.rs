//! `failpoint!(name)`: a fail point of tikv's `fail` crate with the
//! `failpoints` feature (the crate's own tests, tests/failpoints.rs, set
//! what it does: a pause, a sleep, a callback), and nothing at all
//! without it.

/// A named fail point; nothing without the `failpoints` feature.
macro_rules! failpoint {
    ($name:literal) => {{
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name);
    }};
}
pub(crate) use failpoint;
