//! The names of the keys: the bookkeeping's (counters, occupancy and
//! waiting sets, dead marks) and Redisson's fair queues', and the instance
//! (worker process) an occupancy or waiting token names.

pub fn counter_key(name: &str) -> String {
    format!("torture:counter:{name}")
}

pub fn occupancy_key(name: &str) -> String {
    format!("torture:occ:{name}")
}

pub fn waiting_key(name: &str) -> String {
    format!("torture:waiting:{name}")
}

pub fn dead_key(instance: &str) -> String {
    format!("torture:dead:{instance}")
}

/// Redisson's `prefixName(prefix, name)`: braces unless the name has one.
fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

pub fn fair_queue_key(name: &str) -> String {
    prefix_name("redisson_lock_queue", name)
}

pub fn fair_timeout_key(name: &str) -> String {
    prefix_name("redisson_lock_timeout", name)
}

pub fn instance_of(token: &str) -> &str {
    token.split('/').next().unwrap_or(token)
}
