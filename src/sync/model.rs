//! `crate::sync` with the feature `shuttle`: `shuttle`'s primitives behind
//! parking_lot-shaped wrappers, and a virtual clock.
//!
//! # Time
//!
//! `shuttle` has no time: its `wait_timeout` never times out. Here the
//! clock ([`now`]) is virtual, per execution (all of an execution's threads
//! run on the test's one OS thread, so a `std` thread-local holds it), and
//! starts at [`epoch`]. A timed wait ([`Condvar::wait_until`]) registers
//! its deadline with the execution's timer thread (started by
//! [`explore::check`]) and blocks on the condition variable as an untimed
//! wait would. The timer thread moves the clock to the earliest registered
//! deadline and wakes the waits that are due when no other thread of the
//! execution can run (each is finished or blocked, as `shuttle`'s own
//! state says), so that running code takes no time and a wait times out
//! only if nothing that could still run would have woken it; and, with the
//! chance `fire` that a test gives, also while threads can run (time
//! passing in the middle of their work). A wait times out only
//! once the clock has reached its deadline. When every thread waits without
//! a deadline, `shuttle` reports the deadlock: a lost wake-up of an untimed
//! wait.
//!
//! Unlike `parking_lot`'s, a wait here may wake spuriously (the timer wakes
//! every waiter of a condition variable one of whose waits is due); the
//! code under test loops around its waits anyway.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::{Duration, Instant};

pub(crate) use shuttle::sync::atomic;
pub(crate) use shuttle::thread;

static BASE: OnceLock<Instant> = OnceLock::new();

std::thread_local! {
    /// The virtual time of the execution running on this OS thread.
    static OFFSET: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// Its timer thread's state (none outside [`explore::check`]).
    static TIMERS: RefCell<Option<Rc<Timers>>> = const { RefCell::new(None) };
}

/// Whether a thread of the execution other than the caller (the timer
/// thread) can run: is neither finished nor blocked (in a wait, a `join`, a
/// mutex). Read from `shuttle`'s own state.
fn others_can_run() -> bool {
    use shuttle_engine::runtime::execution::ExecutionState;
    use shuttle_engine::runtime::task::TaskId;
    ExecutionState::with(|state| {
        let me = state.current().id();
        (0..)
            .map_while(|id| state.try_get(TaskId::from(id)))
            .any(|task| task.id() != me && !task.finished() && task.runnable())
    })
}

/// Where the virtual clock starts (a real instant, the same for every
/// execution of the process).
pub(crate) fn epoch() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// The virtual clock.
pub(crate) fn now() -> Instant {
    epoch() + OFFSET.with(Cell::get)
}

/// Moves the clock forward to `at` (never back).
fn advance_to(at: Instant) {
    let offset = at.saturating_duration_since(epoch());
    OFFSET.with(|clock| {
        if offset > clock.get() {
            clock.set(offset);
        }
    });
}

fn timers() -> Option<Rc<Timers>> {
    TIMERS.with(|timers| timers.borrow().clone())
}

/// The timed waits of one execution, and the timer thread's wake-up.
struct Timers {
    state: shuttle::sync::Mutex<TimerState>,
    changed: shuttle::sync::Condvar,
    /// The chance that the timer thread, when it runs, lets time pass.
    fire: f64,
}

#[derive(Default)]
struct TimerState {
    next: u64,
    pending: Vec<TimedWait>,
    done: bool,
}

struct TimedWait {
    id: u64,
    at: Instant,
    wake: Arc<CondvarInner>,
}

impl Timers {
    fn register(&self, at: Instant, wake: &Arc<CondvarInner>) -> u64 {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.next += 1;
        let id = state.next;
        state.pending.push(TimedWait {
            id,
            at,
            wake: Arc::clone(wake),
        });
        self.changed.notify_all();
        id
    }

    fn deregister(&self, id: u64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.pending.retain(|pending| pending.id != id);
    }

    /// The timer thread: until the execution's body returned, lets time
    /// pass to the earliest deadline at moments the scheduler picks.
    #[cfg_attr(not(test), allow(dead_code))]
    fn run(&self) {
        loop {
            {
                let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if state.done {
                        return;
                    }
                    if !state.pending.is_empty() {
                        break;
                    }
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            if others_can_run() && !coin(self.fire) {
                thread::yield_now();
                continue;
            }
            let due: Vec<Arc<CondvarInner>> = {
                let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(earliest) = state.pending.iter().map(|p| p.at).min() else {
                    continue;
                };
                advance_to(earliest);
                let now = now();
                state
                    .pending
                    .iter()
                    .filter(|p| p.at <= now)
                    .map(|p| Arc::clone(&p.wake))
                    .collect()
            };
            for wake in due {
                wake.notify_all();
            }
            thread::yield_now();
        }
    }
}

/// `true` with the chance `p`, chosen by the schedule (replayed with it).
pub(crate) fn coin(p: f64) -> bool {
    use shuttle::rand::Rng;
    shuttle::rand::thread_rng().gen_bool(p.clamp(0.0, 1.0))
}

/// A number in `0..n`, chosen by the schedule.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn pick(n: usize) -> usize {
    use shuttle::rand::Rng;
    shuttle::rand::thread_rng().gen_range(0..n.max(1))
}

/// A `parking_lot`-shaped mutex over `shuttle`'s.
#[derive(Default)]
pub(crate) struct Mutex<T: ?Sized> {
    inner: shuttle::sync::Mutex<T>,
}

/// Its guard: `shuttle`'s, taken out while a condition variable waits.
pub(crate) struct MutexGuard<'a, T: ?Sized> {
    inner: Option<shuttle::sync::MutexGuard<'a, T>>,
}

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Mutex<T> {
        Mutex {
            inner: shuttle::sync::Mutex::new(value),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            inner: Some(self.inner.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }

    /// The guard if the mutex is free now, else `None`.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let inner = match self.inner.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(MutexGuard { inner: Some(inner) })
    }
}

// The guard is `None` only inside `Condvar`'s waits, which put it back
// before they return: never seen by a deref.
#[allow(clippy::expect_used)]
impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner.as_deref().expect("a guard outside a wait")
    }
}

#[allow(clippy::expect_used)]
impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner.as_deref_mut().expect("a guard outside a wait")
    }
}

/// Whether a timed wait timed out (`parking_lot::WaitTimeoutResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub(crate) fn timed_out(self) -> bool {
        self.0
    }
}

/// A `parking_lot`-shaped condition variable over `shuttle`'s, with timed
/// waits on the virtual clock (see the module docs).
#[derive(Default)]
pub(crate) struct Condvar {
    inner: Arc<CondvarInner>,
}

/// `shuttle`'s condition variable (shared with the timer thread).
#[derive(Default)]
struct CondvarInner {
    condvar: shuttle::sync::Condvar,
}

impl CondvarInner {
    fn notify_one(&self) {
        self.condvar.notify_one();
    }

    fn notify_all(&self) {
        self.condvar.notify_all();
    }
}

impl Condvar {
    pub(crate) fn new() -> Condvar {
        Condvar::default()
    }

    fn block<T>(&self, guard: &mut MutexGuard<'_, T>) {
        if let Some(inner) = guard.inner.take() {
            guard.inner = Some(
                self.inner
                    .condvar
                    .wait(inner)
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }
    }

    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        self.block(guard);
    }

    /// Waits until notified or the virtual clock reaches `at`.
    pub(crate) fn wait_until<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        at: Instant,
    ) -> WaitTimeoutResult {
        if now() >= at {
            return WaitTimeoutResult(true);
        }
        let Some(timers) = timers() else {
            // Outside `explore::check`: nothing lets time pass but this.
            advance_to(at);
            return WaitTimeoutResult(true);
        };
        let id = timers.register(at, &self.inner);
        self.block(guard);
        timers.deregister(id);
        WaitTimeoutResult(now() >= at)
    }

    pub(crate) fn notify_one(&self) -> bool {
        self.inner.notify_one();
        true
    }

    pub(crate) fn notify_all(&self) -> usize {
        self.inner.notify_all();
        0
    }
}

/// `crossbeam_channel`'s bounded channel, the part the deadline thread
/// uses, over the wrappers above (so that its timed receive is on the
/// virtual clock).
pub(crate) mod channel {
    use super::*;

    struct ChannelShared<T> {
        state: Mutex<ChannelState<T>>,
        ready: Condvar,
    }

    struct ChannelState<T> {
        queue: VecDeque<T>,
        capacity: usize,
        senders: usize,
        receiver: bool,
    }

    pub(crate) struct Sender<T>(Arc<ChannelShared<T>>);
    pub(crate) struct Receiver<T>(Arc<ChannelShared<T>>);

    #[derive(Debug)]
    pub(crate) struct TrySendError<T>(pub T);
    #[derive(Debug)]
    pub(crate) struct RecvError;
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) enum RecvTimeoutError {
        Timeout,
        Disconnected,
    }

    impl RecvTimeoutError {
        pub(crate) fn is_disconnected(&self) -> bool {
            *self == RecvTimeoutError::Disconnected
        }
    }

    pub(crate) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
        let shared = Arc::new(ChannelShared {
            state: Mutex::new(ChannelState {
                queue: VecDeque::new(),
                capacity,
                senders: 1,
                receiver: true,
            }),
            ready: Condvar::new(),
        });
        (Sender(Arc::clone(&shared)), Receiver(shared))
    }

    impl<T> Sender<T> {
        pub(crate) fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
            let mut state = self.0.state.lock();
            if !state.receiver || state.queue.len() >= state.capacity {
                return Err(TrySendError(value));
            }
            state.queue.push_back(value);
            self.0.ready.notify_all();
            Ok(())
        }
    }

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            self.0.state.lock().senders += 1;
            Sender(Arc::clone(&self.0))
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            let mut state = self.0.state.lock();
            state.senders -= 1;
            if state.senders == 0 {
                self.0.ready.notify_all();
            }
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            self.0.state.lock().receiver = false;
        }
    }

    impl<T> Receiver<T> {
        pub(crate) fn recv(&self) -> Result<T, RecvError> {
            let mut state = self.0.state.lock();
            loop {
                if let Some(value) = state.queue.pop_front() {
                    return Ok(value);
                }
                if state.senders == 0 {
                    return Err(RecvError);
                }
                self.0.ready.wait(&mut state);
            }
        }

        pub(crate) fn recv_deadline(&self, at: Instant) -> Result<T, RecvTimeoutError> {
            let mut state = self.0.state.lock();
            loop {
                if let Some(value) = state.queue.pop_front() {
                    return Ok(value);
                }
                if state.senders == 0 {
                    return Err(RecvTimeoutError::Disconnected);
                }
                if now() >= at {
                    return Err(RecvTimeoutError::Timeout);
                }
                self.0.ready.wait_until(&mut state, at);
            }
        }
    }
}

/// Running a test body over many random schedules, with the virtual clock.
#[cfg(test)]
pub(crate) mod explore {
    use super::*;
    pub(crate) use super::{coin, pick};

    /// The schedules each test explores: `default`, or `SHUTTLE_ITERATIONS`
    /// (scripts/schedules.sh's long run).
    pub(crate) fn iterations(default: usize) -> usize {
        std::env::var("SHUTTLE_ITERATIONS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(default)
    }

    /// Runs `body` over `iterations` random schedules (`SHUTTLE_PCT=depth`
    /// uses the PCT scheduler instead). Each execution starts its clock at
    /// [`epoch`] and a timer thread that lets time pass (see the module
    /// docs; `fire`: the chance that it does while threads can run). A
    /// failing schedule panics with its number and `shuttle`'s seed
    /// (`SHUTTLE_RANDOM_SEED=seed` with `SHUTTLE_ITERATIONS=1` replays it).
    pub(crate) fn check(iterations: usize, fire: f64, body: impl Fn() + Send + Sync + 'static) {
        let mut config = shuttle::Config::new();
        config.silence_warnings = true;
        let body = Arc::new(body);
        let execution = move || {
            OFFSET.with(|clock| clock.set(Duration::ZERO));
            let timers = Rc::new(Timers {
                state: shuttle::sync::Mutex::new(TimerState::default()),
                changed: shuttle::sync::Condvar::new(),
                fire,
            });
            TIMERS.with(|slot| *slot.borrow_mut() = Some(Rc::clone(&timers)));
            // The timer thread reaches the state through the thread-local
            // (an `Rc` is not `Send`; every thread runs on this OS thread).
            let timer = thread::spawn(|| {
                if let Some(timers) = super::timers() {
                    timers.run();
                }
            });
            body();
            {
                let mut state = timers.state.lock().unwrap_or_else(PoisonError::into_inner);
                state.done = true;
                timers.changed.notify_all();
            }
            let _ = timer.join();
            TIMERS.with(|slot| *slot.borrow_mut() = None);
        };
        let pct = std::env::var("SHUTTLE_PCT")
            .ok()
            .and_then(|d| d.parse::<usize>().ok());
        let explored = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = {
            let explored = Arc::clone(&explored);
            move || {
                explored.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                execution();
            }
        };
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match pct {
            Some(depth) => shuttle::Runner::new(
                shuttle::scheduler::PctScheduler::new(depth, iterations),
                config,
            )
            .run(counted),
            None => {
                shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(iterations), config)
                    .run(counted)
            }
        }));
        if let Err(panic) = run {
            eprintln!(
                "schedule exploration: failed at schedule {} of {iterations}",
                explored.load(std::sync::atomic::Ordering::Relaxed)
            );
            std::panic::resume_unwind(panic);
        }
    }

    /// Sleeps `duration` of virtual time (`shuttle`'s own `sleep` only
    /// yields).
    pub(crate) fn sleep(duration: Duration) {
        let until = now() + duration;
        let lock = Mutex::new(());
        let wake = Condvar::new();
        let mut guard = lock.lock();
        while now() < until {
            wake.wait_until(&mut guard, until);
        }
    }
}

/// An in-memory duplex byte stream, two ends, for the multiplexed socket
/// (`crate::net::stream::Stream::Mem`) and a fake server: writes never
/// block, reads block until bytes come, the stream is shut down, or the
/// read timeout passes on the virtual clock (`WouldBlock`, as a socket's
/// `SO_RCVTIMEO`). A read may return fewer bytes than are there, or be
/// interrupted by a signal (`Interrupted`), both chosen by the schedule, as
/// a socket's may.
#[cfg(test)]
pub(crate) mod pipe {
    use std::io;

    use super::*;

    struct PipeShared {
        state: Mutex<PipeState>,
        readable: Condvar,
    }

    #[derive(Default)]
    struct PipeState {
        /// What each end has to read.
        bytes: [VecDeque<u8>; 2],
        read_timeout: [Option<Duration>; 2],
        closed: bool,
    }

    /// One end (a clone shares it, as a socket's `try_clone`).
    pub(crate) struct Pipe {
        shared: Arc<PipeShared>,
        side: usize,
    }

    /// A connected pair of ends: the client's, the server's.
    pub(crate) fn pipe() -> (Pipe, Pipe) {
        let shared = Arc::new(PipeShared {
            state: Mutex::new(PipeState::default()),
            readable: Condvar::new(),
        });
        (
            Pipe {
                shared: Arc::clone(&shared),
                side: 0,
            },
            Pipe { shared, side: 1 },
        )
    }

    impl Pipe {
        pub(crate) fn read_once(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            // A signal may interrupt any read of the client's end, as
            // Linux interrupts a socket's with a read timeout for any
            // handled signal (`EINTR`, issue 29 item 3): the reader must
            // read again, never take it for a dropped connection. (The
            // fake server's end is the test's, not the crate's.)
            if self.side == 0 && explore::coin(0.05) {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let mut state = self.shared.state.lock();
            let until = state.read_timeout[self.side].map(|t| now() + t);
            loop {
                let available = state.bytes[self.side].len().min(buf.len());
                if available > 0 {
                    let n = match available > 1 && explore::coin(0.25) {
                        true => 1 + explore::pick(available),
                        false => available,
                    };
                    for (to, from) in buf.iter_mut().zip(state.bytes[self.side].drain(..n)) {
                        *to = from;
                    }
                    return Ok(n);
                }
                if state.closed || buf.is_empty() {
                    return Ok(0);
                }
                match until {
                    Some(until) => {
                        if self
                            .shared
                            .readable
                            .wait_until(&mut state, until)
                            .timed_out()
                        {
                            return Err(io::Error::from(io::ErrorKind::WouldBlock));
                        }
                    }
                    None => self.shared.readable.wait(&mut state),
                }
            }
        }

        pub(crate) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut state = self.shared.state.lock();
            if state.closed {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            state.bytes[1 - self.side].extend(buf);
            self.shared.readable.notify_all();
            Ok(buf.len())
        }

        pub(crate) fn try_clone(&self) -> io::Result<Pipe> {
            Ok(Pipe {
                shared: Arc::clone(&self.shared),
                side: self.side,
            })
        }

        pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
            self.shared.state.lock().read_timeout[self.side] = timeout;
            Ok(())
        }

        /// Shuts both ways down: every read returns what is left, then the
        /// end of the stream; every write fails.
        pub(crate) fn shutdown(&self) -> io::Result<()> {
            self.shared.state.lock().closed = true;
            self.shared.readable.notify_all();
            Ok(())
        }
    }

    impl io::Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.read_once(buf)
        }
    }

    impl io::Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Pipe::write(self, buf)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
