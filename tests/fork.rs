//! A `fork()`ed child that inherited a `Client` must not use it: it would
//! share the parent's client id and thread numbers and "re-enter" the
//! parent's locks while the parent holds them.
#![allow(unsafe_code)] // fork(2), waitpid(2) and _exit(2), in this test only

mod support;

use redisson_lock::Error;
use support::RedisServer;

/// Runs `child` in a forked child process and returns its exit code.
fn in_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only runs `child`, which takes no lock that another
    // thread of the parent could have held at the fork (the client refuses
    // before touching any), then leaves with `_exit`, running no destructor.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child();
        // SAFETY: ends the child at once, as fork(2) children should.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid failed");
    assert!(libc::WIFEXITED(status), "the child did not exit normally");
    libc::WEXITSTATUS(status)
}

#[test]
fn a_forked_child_cannot_reenter_or_release_the_parents_lock() {
    let (server, client) = RedisServer::start_with_client();
    let lock = client.lock("forked");
    let guard = lock.lock().expect("lock");
    let parent = std::process::id();

    let mut guard = Some(guard);
    let code = in_child(|| {
        // Re-entering would succeed with the inherited identity.
        let reentry = matches!(
            lock.try_lock(),
            Err(Error::ForkedProcess { created_by, used_by })
                if created_by == parent && used_by != parent
        );
        // Releasing the inherited guard must not release the parent's hold.
        let release = matches!(
            guard.take().map(|guard| guard.unlock()),
            Some(Err(Error::ForkedProcess { .. }))
        );
        let query = matches!(lock.is_locked(), Err(Error::ForkedProcess { .. }));
        i32::from(!reentry) | i32::from(!release) << 1 | i32::from(!query) << 2
    });
    assert_eq!(
        code, 0,
        "bits: 1 reentry allowed, 2 release allowed, 4 query allowed"
    );

    let count: String = server.cmd(&["HGET", "forked", &client.owner_field()]);
    assert_eq!(count, "1", "the parent still holds it, once");
    guard
        .take()
        .expect("guard")
        .unlock()
        .expect("parent unlock");
}
