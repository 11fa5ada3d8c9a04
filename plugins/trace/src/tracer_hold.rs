//! How long a traced program may have waited for its tracer.
//!
//! A traced program's calls wait for a reader outside its cgroup: under
//! runc every notified call waits for the seccomp listener's answer; under
//! gVisor the sandbox retries a trace point the socket has no room for
//! until the reader makes room. While it waits, the program neither runs
//! nor waits for a CPU, so to every counter of its cgroup it looks like a
//! program that chose to sleep, and a starved tracer (a CPU hog beside the
//! listener's thread) would "prove" a correct program's timeout. That time
//! is the tracer's: [`TracerHold::bound`] is an upper bound of it, which
//! the window takes out of the program's clock as it does frozen time.
//!
//! The bound covers every instant at which a call of the program may have
//! waited, each counted once or more, never less:
//! - **seccomp listener** ([`ListenerClock`]): a notified call waits only
//!   while the listener is not asleep in its poll. It counts the time from
//!   each wake-up to its next wait (the answer, and whatever delayed it),
//!   and the time between a call's arrival and the wake-up, which is the
//!   listener thread's run-queue delay over the wait
//!   (`/proc/thread-self/schedstat`, second field; unreadable, the whole
//!   wait counts). A wake-up not run yet (the thread is runnable at a
//!   look) counts from the moment it went to wait.
//! - **gVisor stream** ([`StreamClock`]): the sandbox can be held only
//!   while a point it sent is unread. Each point carries its time: the
//!   span from it to the point's reading is counted (the union over
//!   points, so overlapping points count once). At a look, points still
//!   unread count from the moment the reader last found the socket empty.

use std::fs::File;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An upper bound of the time a program's calls waited for its tracer,
/// shared between the tracer (which adds to it) and the program's window
/// (which reads it).
#[derive(Debug, Default)]
pub struct TracerHold {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Upper bound of the holds that ended.
    held: Duration,
    /// The tracer has been working since then: a call may wait on it.
    busy_since: Option<Instant>,
    /// The tracer has been waiting for work since then.
    idle_since: Option<Instant>,
    /// How a look tells that work arrived which the tracer has not taken.
    pending: Pending,
    /// Test hook: how late a listener answers each wake-up.
    slow: Option<Duration>,
}

#[derive(Debug, Default)]
enum Pending {
    #[default]
    Unknown,
    /// The listener's thread: runnable while waiting means it was woken.
    Thread(libc::pid_t),
    /// The trace socket, while the reader holds it open: readable means
    /// points are unread.
    Socket(RawFd),
}

impl TracerHold {
    pub fn new() -> Arc<TracerHold> {
        Arc::new(TracerHold::default())
    }

    /// The hold of a seccomp listener serving from `dir` (slowed when a
    /// test asked for it: see `test_hooks`). It counts from now until the
    /// listener first waits for calls: one that comes before waits too.
    pub(crate) fn for_listener(dir: &std::path::Path) -> Arc<TracerHold> {
        let hold = TracerHold::default();
        hold.lock().busy_since = Some(Instant::now());
        #[cfg(feature = "test-hooks")]
        {
            hold.lock().slow = test_hooks::delay_under(dir);
        }
        #[cfg(not(feature = "test-hooks"))]
        let _ = dir;
        Arc::new(hold)
    }

    /// The time the program's calls may have waited for the tracer so far.
    pub fn bound(&self) -> Duration {
        self.measure(true)
    }

    /// The time counted so far without a wait in progress that the tracer
    /// has not taken yet (which [`TracerHold::bound`] over-counts from the
    /// tracer's last wait): a floor to subtract, at a window's start, so
    /// that what is counted after it is never less than it should be.
    pub fn settled(&self) -> Duration {
        self.measure(false)
    }

    fn measure(&self, with_pending: bool) -> Duration {
        let state = self.lock();
        let now = Instant::now();
        let mut bound = state.held;
        if let Some(since) = state.busy_since {
            bound += now.saturating_duration_since(since);
        } else if let Some(since) = state.idle_since
            && with_pending
            && state.pending.now()
        {
            bound += now.saturating_duration_since(since);
        }
        bound
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking tracer leaves figures that are still upper bounds.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Pending {
    /// Whether work may wait on the tracer now (an unreadable answer says
    /// it may).
    fn now(&self) -> bool {
        match *self {
            Pending::Unknown => false,
            Pending::Thread(tid) => thread_runnable(tid).unwrap_or(true),
            Pending::Socket(fd) => readable(fd).unwrap_or(true),
        }
    }
}

/// Whether a thread of this process is runnable or running (`R` in its
/// stat); `None` when that cannot be read.
fn thread_runnable(tid: libc::pid_t) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state follows the name, which is in parentheses and may hold any.
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    Some(state == 'R')
}

/// Whether `fd` has data to read; `None` when polling it failed.
fn readable(fd: RawFd) -> Option<bool> {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout never blocks. The holder
    // keeps the descriptor open while it is registered (see StreamClock).
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    (ready >= 0).then_some(poll.revents & libc::POLLIN != 0)
}

/// The seccomp listener's side: called from its thread around each wait.
#[derive(Debug)]
pub struct ListenerClock {
    hold: Arc<TracerHold>,
    /// `/proc/thread-self/schedstat` of the listener's thread.
    schedstat: Option<File>,
    /// Its run-queue delay when it last went to wait.
    delay_at_wait: Option<u64>,
}

impl ListenerClock {
    /// The clock of the calling thread (the listener's).
    pub fn new(hold: Arc<TracerHold>) -> ListenerClock {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        hold.lock().pending = Pending::Thread(tid);
        ListenerClock {
            hold,
            schedstat: File::open("/proc/thread-self/schedstat").ok(),
            delay_at_wait: None,
        }
    }

    /// The listener is about to wait for calls: its work since the wake-up
    /// is counted.
    pub fn waiting(&mut self) {
        // The delay read first, the time after the lock: every moment up
        // to the wait is in one or the other (a wait for the lock is no
        // run-queue delay).
        let delay = self.run_delay();
        let mut state = self.hold.lock();
        let now = Instant::now();
        if let Some(since) = state.busy_since.take() {
            state.held += now.saturating_duration_since(since);
        }
        state.idle_since = Some(now);
        drop(state);
        self.delay_at_wait = delay;
    }

    /// The listener's wait returned: the time a call waited for the
    /// wake-up (its run-queue delay) is counted, and it is busy from now.
    pub fn woke(&mut self) {
        // The time first, the delay after: a preemption between the two
        // is counted twice rather than not at all.
        let now = Instant::now();
        let delay = self.run_delay();
        let mut state = self.hold.lock();
        let idle_since = state.idle_since.take();
        state.held += match (self.delay_at_wait, delay) {
            (Some(before), Some(after)) => Duration::from_nanos(after.saturating_sub(before)),
            // Not measured: the whole wait may have been a call's.
            _ => idle_since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since)),
        };
        state.busy_since = Some(now);
        let slow = state.slow;
        drop(state);
        if let Some(delay) = slow {
            std::thread::sleep(delay);
        }
    }

    /// The thread's run-queue delay so far, in ns (schedstat's second
    /// field).
    fn run_delay(&self) -> Option<u64> {
        let file = self.schedstat.as_ref()?;
        let mut buffer = [0u8; 96];
        // seq_file: a read at offset 0 renders the figures anew.
        let read = file.read_at(&mut buffer, 0).ok()?;
        std::str::from_utf8(&buffer[..read])
            .ok()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }
}

impl Drop for ListenerClock {
    fn drop(&mut self) {
        // The listener is gone: nothing waits on it any more (calls fail).
        let mut state = self.hold.lock();
        if let Some(since) = state.busy_since.take() {
            state.held += since.elapsed();
        }
        state.idle_since = None;
        state.pending = Pending::Unknown;
    }
}

/// The gVisor reader's side: called as it reads the trace stream.
#[derive(Debug)]
pub struct StreamClock {
    hold: Arc<TracerHold>,
    /// The end of the spans counted so far (they are counted as a union).
    covered_until: Option<Instant>,
}

impl StreamClock {
    /// The reader holds the stream's socket `fd` open from now until this
    /// clock is dropped (drop it before the socket).
    pub fn connected(hold: Arc<TracerHold>, fd: RawFd) -> StreamClock {
        {
            let mut state = hold.lock();
            state.pending = Pending::Socket(fd);
            state.idle_since = Some(Instant::now());
        }
        StreamClock {
            hold,
            covered_until: None,
        }
    }

    /// A point sent at `sent_ns` (ns since the Unix epoch, the sandbox's
    /// clock; `None` when it carries no time) was read now; `drained` says
    /// whether the socket holds no more.
    pub fn read(&mut self, sent_ns: Option<i64>, drained: bool) {
        let now = Instant::now();
        let mut state = self.hold.lock();
        if let Some(sent_ns) = sent_ns.filter(|&ns| ns > 0) {
            let now_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos());
            let lag = Duration::from_nanos(
                u64::try_from(now_ns.saturating_sub(sent_ns as u128)).unwrap_or(u64::MAX),
            );
            let start = now.checked_sub(lag).unwrap_or(now);
            let start = self.covered_until.map_or(start, |until| start.max(until));
            state.held += now.saturating_duration_since(start);
            self.covered_until = Some(now);
        }
        if drained {
            state.idle_since = Some(now);
        }
    }
}

impl Drop for StreamClock {
    fn drop(&mut self) {
        let mut state = self.hold.lock();
        state.pending = Pending::Unknown;
        state.idle_since = None;
    }
}

/// Hooks for tests of the backends: a listener made slow, as a starved
/// one is, on a machine that is not starved.
#[cfg(feature = "test-hooks")]
pub mod test_hooks {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::Duration;

    static SLOW: Mutex<Vec<(PathBuf, Duration)>> = Mutex::new(Vec::new());

    /// Every seccomp listener started from now on in a folder under `dir`
    /// (a client's owner folder) answers each wake-up `delay` late.
    pub fn slow_listeners_under(dir: &Path, delay: Duration) {
        SLOW.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((dir.to_path_buf(), delay));
    }

    pub(super) fn delay_under(dir: &Path) -> Option<Duration> {
        SLOW.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .find(|(under, _)| dir.starts_with(under))
            .map(|(_, delay)| *delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_listener_is_counted_from_its_wake_up_to_its_next_wait() {
        let hold = TracerHold::for_listener(Path::new("/nonexistent"));
        let mut clock = ListenerClock::new(hold.clone());
        assert!(clock.run_delay().is_some(), "schedstat is readable here");
        clock.waiting();
        // Waiting, and this (the listener's) thread is running: a look
        // counts the wait so far, as a wake-up not yet taken would be.
        let during_wait = hold.bound();
        clock.woke();
        std::thread::sleep(Duration::from_millis(30));
        // Busy: counted as it goes.
        assert!(hold.bound() >= Duration::from_millis(30));
        clock.waiting();
        let held = hold.lock().held;
        assert!(held >= Duration::from_millis(30), "{held:?}");
        assert!(during_wait < Duration::from_millis(30), "{during_wait:?}");
        drop(clock);
        // Gone: what it held stays, nothing more is added.
        let after = hold.bound();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(hold.bound(), after);
    }

    #[test]
    fn a_thread_asleep_in_its_wait_is_not_counted() {
        let hold = TracerHold::for_listener(Path::new("/nonexistent"));
        let (ready, wait) = std::sync::mpsc::channel::<()>();
        let (go, woken) = std::sync::mpsc::channel::<()>();
        let listener = {
            let hold = hold.clone();
            std::thread::spawn(move || {
                let mut clock = ListenerClock::new(hold);
                clock.waiting();
                ready.send(()).unwrap();
                woken.recv().unwrap();
                clock.woke();
                clock.waiting();
            })
        };
        wait.recv().unwrap();
        // Asleep on its channel: no call waits on it.
        let tid = match hold.lock().pending {
            Pending::Thread(tid) => tid,
            ref other => panic!("{other:?}"),
        };
        while thread_runnable(tid) != Some(false) {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            hold.bound() < Duration::from_millis(20),
            "{:?}",
            hold.bound()
        );
        go.send(()).unwrap();
        listener.join().unwrap();
    }

    /// Pins the calling thread to CPU 0.
    fn pin_to_cpu0() {
        // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and the call get
        // pointers to it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
    }

    #[test]
    fn a_starved_listeners_wake_up_delay_is_counted() {
        use std::sync::atomic::{AtomicBool, Ordering};
        // A CPU hog and the listener on one CPU, the listener at the
        // lowest priority (SCHED_IDLE): each call, sent while the listener
        // sleeps, waits for the hog to yield the CPU before the listener
        // even wakes (its run-queue delay). Every call's wait, from its
        // sending to its answer, must be in the bound.
        let stop = Arc::new(AtomicBool::new(false));
        let hog = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin_to_cpu0();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let hold = TracerHold::for_listener(Path::new("/nonexistent"));
        let (calls, incoming) = std::sync::mpsc::channel::<()>();
        let (answer, answers) = std::sync::mpsc::channel::<Instant>();
        let listener = {
            let hold = hold.clone();
            std::thread::spawn(move || {
                pin_to_cpu0();
                let idle = libc::sched_param { sched_priority: 0 };
                // SAFETY: lowers this thread's own policy.
                assert_eq!(
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) },
                    0
                );
                let mut clock = ListenerClock::new(hold);
                loop {
                    clock.waiting();
                    let call = incoming.recv();
                    clock.woke();
                    if call.is_err() {
                        break;
                    }
                    answer.send(Instant::now()).unwrap();
                }
            })
        };
        let before = hold.bound();
        let mut waited = Duration::ZERO;
        // Calls until they waited long enough in all to tell.
        for _ in 0..10_000 {
            if waited >= Duration::from_millis(50) {
                break;
            }
            // Each call finds the listener asleep in its wait: what it
            // waits for is the wake-up.
            loop {
                let tid = match hold.lock().pending {
                    Pending::Thread(tid) => Some(tid),
                    _ => None,
                };
                if tid.and_then(thread_runnable) == Some(false) {
                    break;
                }
                std::thread::yield_now();
            }
            let sent = Instant::now();
            calls.send(()).unwrap();
            waited += answers.recv().unwrap().saturating_duration_since(sent);
        }
        drop(calls);
        listener.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        hog.join().unwrap();
        let counted = hold.bound().saturating_sub(before);
        // The listener was starved (else the test shows nothing), and the
        // calls' waits are covered (the clock reads around them aside).
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(
            counted + Duration::from_millis(2) >= waited,
            "counted {counted:?} of {waited:?}"
        );
    }

    #[test]
    fn gvisor_points_count_from_their_time_to_their_reading_once() {
        let hold = TracerHold::new();
        let mut clock = StreamClock::connected(hold.clone(), -1);
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        // Two points sent 40 ms and 30 ms ago, read now: 40 ms, not 70.
        clock.read(Some(now_ns - 40_000_000), false);
        clock.read(Some(now_ns - 30_000_000), true);
        let held = hold.lock().held;
        assert!(
            held >= Duration::from_millis(40) && held < Duration::from_millis(60),
            "{held:?}"
        );
        // A point without a time adds nothing; with the socket empty
        // (poll ignores a negative descriptor), a look adds nothing either.
        clock.read(None, true);
        assert_eq!(hold.bound(), held);
    }
}
