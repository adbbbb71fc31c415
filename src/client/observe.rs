//! The metrics knob of [`ClientBuilder`] (feature `metrics`); the mechanism
//! is the engine's (`crate::engine::observe`).

use std::sync::Arc;

use crate::client::ClientBuilder;
use crate::engine::observe::Settings;

#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
impl ClientBuilder {
    /// Adds a `lock` label to the client's per-lock metrics (those with a
    /// `kind` label: acquire and hold durations, contended, lost, held,
    /// waiters) for the lock names `label` maps to `Some`. Only with the
    /// `metrics` feature.
    ///
    /// Without it the metrics carry no lock name: names are unbounded, and
    /// each distinct label value is a time series the metrics backend keeps.
    /// Map only a bounded set (the names of your scheduled jobs, a prefix),
    /// as ShedLock does for job names; return `None` for the rest, which are
    /// counted without a `lock` label.
    ///
    /// Costs one call of `label` per acquire call and one per new hold
    /// (never per renewal), and a `String` per labelled metric update.
    ///
    /// ```no_run
    /// # #[cfg(feature = "metrics")] {
    /// let client = redisson_lock::Client::builder("redis://127.0.0.1:6379")
    ///     // `job:nightly-report` -> lock="nightly-report"; other names unlabelled.
    ///     .metrics_lock_label(|name| name.strip_prefix("job:").map(str::to_owned))
    ///     .build()?;
    /// # }
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn metrics_lock_label(
        mut self,
        label: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.observe = Settings::with_lock_label(Arc::new(label));
        self
    }
}
