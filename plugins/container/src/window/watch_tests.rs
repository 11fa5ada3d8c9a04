//! [`Window::watch`] driven through its seam, the [`Program`] trait, by a
//! scripted program: the test decides when it ends, what `ended` says at
//! the limit, whether the backend sees it paused, and what the end of its
//! output means. No cgroup is measured (no root, no engine needed), and the
//! clock is tokio's paused one, so a limit of seconds fires at once.

use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use progscore_sandbox::timing::MAX_STRETCH;
use progscore_trace::tracer_hold::StreamClock;
use tokio::sync::{Notify, watch};

use super::*;

/// A limit whose multiples are easy to read in the assertions.
const LIMIT: Duration = Duration::from_secs(1);

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// What the window asked of the program, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Wait,
    Ended,
    Kill,
    WaitKilled,
    KillCancelled,
    OutputEnded,
}

/// How the scripted program behaves; the default never ends by itself.
#[derive(Default)]
struct Script {
    /// It exits by itself this long after its start, with this code.
    exits_after: Option<(Duration, i64)>,
    /// What `ended` answers when a limit fires.
    ended_at_limit: Option<i64>,
    /// The exit a kill at a limit leaves (137, SIGKILL, unless it exited
    /// just before the kill landed).
    killed_exit: Option<i64>,
    /// Its wait fails with this backend fault.
    wait_fault: Option<String>,
    /// The backend sees the sandbox paused from outside over this span of
    /// its window (no cgroup freezer to measure it).
    paused: Option<Range<Duration>>,
    /// `output_ended` disbelieves an early end of the output, saying this.
    output_cut: Option<String>,
}

/// A started program as a backend would hand it to the window, with its
/// end held in a channel: its own exit, a kill's, or a cancellation's.
struct Scripted {
    script: Script,
    started: Instant,
    exit: watch::Sender<Option<i64>>,
    calls: Mutex<Vec<Call>>,
    /// Signalled once the window waits for the program: it is running.
    running: Notify,
}

impl Scripted {
    /// Released now, as the window's clock starts.
    fn start(script: Script) -> Scripted {
        Scripted {
            script,
            started: Instant::now(),
            exit: watch::Sender::new(None),
            calls: Mutex::new(Vec::new()),
            running: Notify::new(),
        }
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    /// Ends the program with `code`, unless it has ended already.
    fn finish(&self, code: i64) {
        self.exit
            .send_if_modified(|exit| exit.is_none() && exit.replace(code).is_none());
    }

    async fn exit_code(&self) -> i64 {
        let mut exit = self.exit.subscribe();
        let code = *exit
            .wait_for(Option::is_some)
            .await
            .expect("the sender lives");
        code.expect("waited for an exit")
    }

    /// Its output streams, which end as the program does.
    async fn output(&self) -> Result<(), String> {
        self.exit_code().await;
        Ok(())
    }
}

/// A program that exits by itself with `code` after `after`.
fn exits(after: Duration, code: i64) -> Scripted {
    Scripted::start(Script {
        exits_after: Some((after, code)),
        ..Script::default()
    })
}

impl Program for Scripted {
    type Exit = i64;
    type Fault = String;

    async fn wait(&self) -> Result<i64, String> {
        self.record(Call::Wait);
        self.running.notify_one();
        if let Some(fault) = &self.script.wait_fault {
            return Err(fault.clone());
        }
        if let Some((after, code)) = self.script.exits_after {
            let mut exit = self.exit.subscribe();
            tokio::select! {
                () = tokio::time::sleep_until(self.started + after) => self.finish(code),
                _ = exit.wait_for(Option::is_some) => {}
            }
        }
        Ok(self.exit_code().await)
    }

    async fn ended(&self) -> Result<Option<i64>, String> {
        self.record(Call::Ended);
        // Ended: its streams close with it.
        if let Some(code) = self.script.ended_at_limit {
            self.finish(code);
        }
        Ok(self.script.ended_at_limit)
    }

    async fn kill(&self) {
        self.record(Call::Kill);
        self.finish(self.script.killed_exit.unwrap_or(137));
    }

    async fn wait_killed(&self) -> Result<i64, String> {
        self.record(Call::WaitKilled);
        Ok(self.exit_code().await)
    }

    async fn kill_cancelled(&self) {
        self.record(Call::KillCancelled);
        self.finish(137);
    }

    async fn output_ended(&self, ended: Result<(), String>) -> Result<(), String> {
        self.record(Call::OutputEnded);
        match &self.script.output_cut {
            Some(why) => Err(why.clone()),
            None => ended,
        }
    }

    fn output_fault(&self, message: String) -> String {
        format!("output fault: {message}")
    }

    fn paused(&self) -> bool {
        let at = self.started.elapsed();
        self.script
            .paused
            .as_ref()
            .is_some_and(|span| span.contains(&at))
    }
}

/// What a window borrows, owned by the test.
struct Setup {
    limits: Limits,
    load: Load,
    token: CancellationToken,
    alone: bool,
    cpus: usize,
    tracer: Option<Arc<TracerHold>>,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            limits: Limits {
                memory_bytes: 256 << 20,
                cpus: 1.0,
                pids: 64,
                timeout_ms: u64::try_from(LIMIT.as_millis()).unwrap(),
                cpu_time_ms: None,
                output_bytes: 64 << 10,
                tmp_bytes: 64 << 20,
                fuel: None,
                build_bytes: None,
            },
            load: Load::default(),
            token: CancellationToken::new(),
            alone: false,
            cpus: 4,
            tracer: None,
        }
    }

    fn window(&self) -> Window<'_> {
        Window {
            name: "progscore-test-0",
            limits: &self.limits,
            load: &self.load,
            cpus: self.cpus,
            alone: self.alone,
            token: &self.token,
            output_bound: Duration::from_secs(5),
            tracer: self.tracer.as_deref(),
        }
    }

    /// Watches `program` with no cgroup and output that ends with it.
    async fn watch(&self, program: &Scripted) -> Result<Watched<i64>, String> {
        self.watch_output(program, program.output()).await
    }

    /// Watches `program` with no cgroup and the output `io`.
    async fn watch_output(
        &self,
        program: &Scripted,
        io: impl Future<Output = Result<(), String>>,
    ) -> Result<Watched<i64>, String> {
        let last_output = Mutex::new(None);
        self.window()
            .watch(program, unmeasured, io, &last_output, None)
            .await
    }
}

/// No cgroup: the engine's cgroups are not visible from here.
fn unmeasured<'m>() -> Measured<'m> {
    Measured {
        cgroup: None,
        leaf: "progscore-test-0",
        cpu_at_start: None,
        waits_at_start: None,
        ended_tasks: EndedTasks::Unknown,
    }
}

/// The reason a kill at the wall limit left the timeout unproven.
fn unproven_wall_kill(watched: &Watched<i64>) -> String {
    let killed = watched.killed.as_ref().expect("killed at a limit");
    assert_eq!(killed.limit, TimeLimit::Wall);
    assert!(killed.by_fair_time, "no CPU measured: not proven by it");
    let why = killed.unconfirmed.as_ref().expect("not proven unmeasured");
    why.clone()
}

#[tokio::test(start_paused = true)]
async fn a_program_that_ends_within_its_limit_gives_its_own_exit() {
    let setup = Setup::new();
    let program = exits(ms(400), 3);
    let mut watched = setup.watch(&program).await.expect("no fault");
    assert_eq!(watched.exit, Some(3));
    assert!(watched.killed.is_none());
    assert!(watched.confirm.is_none());
    assert_eq!(watched.duration, ms(400));
    // Nothing measured, nothing made up.
    assert!(watched.usage.is_none());
    assert_eq!(
        program.calls(),
        [Call::Wait],
        "never asked to end nor killed"
    );
    assert_eq!(watched.outcome(3), Outcome::Exited { exit_code: 3 });
    assert_eq!(
        setup.load.now(),
        0,
        "out of the load once its window closed"
    );
}

#[tokio::test(start_paused = true)]
async fn without_cpu_measurement_a_wall_timeout_is_killed_but_never_proven() {
    // Neither with other programs beside it nor alone: this client's own
    // count says nothing about the rest of the machine.
    for alone in [false, true] {
        let mut setup = Setup::new();
        setup.alone = alone;
        let program = Scripted::start(Script::default());
        let mut watched = setup.watch(&program).await.expect("no fault");
        assert_eq!(watched.exit, Some(137));
        assert_eq!(watched.duration, LIMIT, "killed at its limit, not later");
        assert_eq!(
            program.calls(),
            [Call::Wait, Call::Ended, Call::Kill, Call::WaitKilled]
        );
        let why = unproven_wall_kill(&watched);
        assert!(
            why.contains("CPU waits could not be measured")
                && why.contains("nothing was measured")
                && why.contains("proven there only by the CPU the program used"),
            "alone {alone}: {why}"
        );
        // Running it again alone could not prove it either (its CPU is
        // not measured): no confirmation is asked for.
        assert!(watched.confirm.is_none(), "alone {alone}");
        assert_eq!(
            watched.outcome(137),
            Outcome::TimedOut {
                limit: TimeLimit::Wall,
                unconfirmed: Some(why),
            }
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_unmeasured_timeout_in_a_crowd_says_more_programs_than_cpus_ran() {
    let mut setup = Setup::new();
    setup.cpus = 1;
    // Another program of this client inside its window meanwhile.
    let _beside = setup.load.enter();
    let program = Scripted::start(Script::default());
    let watched = setup.watch(&program).await.expect("no fault");
    let why = unproven_wall_kill(&watched);
    assert!(
        why.contains("more programs than CPUs were running"),
        "{why}"
    );
    assert_eq!(
        setup.load.now(),
        1,
        "only its own place in the load is left"
    );
}

#[tokio::test(start_paused = true)]
async fn time_paused_from_outside_is_given_back_before_the_limit_fires() {
    let setup = Setup::new();
    // Needs 1.3 s of a 1 s limit: killed when nothing held it ...
    let unpaused = exits(ms(1300), 0);
    let watched = setup.watch(&unpaused).await.expect("no fault");
    assert_eq!(watched.exit, Some(137));
    assert!(watched.killed.is_some());
    // ... but paused from outside for half a second of it, it had only
    // 0.8 s of its own by then: it runs on and exits by itself.
    let paused = Scripted::start(Script {
        exits_after: Some((ms(1300), 0)),
        paused: Some(ms(300)..ms(800)),
        ..Script::default()
    });
    let watched = setup.watch(&paused).await.expect("no fault");
    assert_eq!(watched.exit, Some(0));
    assert!(watched.killed.is_none());
    assert_eq!(watched.duration, ms(1300));
    assert!(
        !paused.calls().contains(&Call::Kill),
        "{:?}",
        paused.calls()
    );
}

#[tokio::test(start_paused = true)]
async fn a_program_still_running_after_its_paused_time_is_killed_unproven() {
    let setup = Setup::new();
    let program = Scripted::start(Script {
        paused: Some(ms(300)..ms(800)),
        ..Script::default()
    });
    let watched = setup.watch(&program).await.expect("no fault");
    assert_eq!(watched.exit, Some(137));
    // The limit plus the pause as the window counted it (over-counted by
    // at most a look or two, never under-counted).
    assert!(
        watched.duration >= ms(1500) && watched.duration <= ms(1540),
        "{:?}",
        watched.duration
    );
    let why = unproven_wall_kill(&watched);
    assert!(why.contains("was frozen from outside for up to"), "{why}");
}

#[tokio::test(start_paused = true)]
async fn a_limit_waits_while_paused_but_a_pause_for_good_ends_the_window() {
    let setup = Setup::new();
    // Paused through its limit and never resumed.
    let program = Scripted::start(Script {
        paused: Some(ms(500)..Duration::MAX),
        ..Script::default()
    });
    let watched = setup.watch(&program).await.expect("no fault");
    assert_eq!(watched.exit, Some(137));
    // Not killed at its limit while paused; held no longer than the frozen
    // time a window gives back, within its stretch.
    assert!(
        watched.duration >= MAX_FROZEN && watched.duration <= MAX_FROZEN + LIMIT * MAX_STRETCH,
        "{:?}",
        watched.duration
    );
    let why = unproven_wall_kill(&watched);
    assert!(why.contains("frozen from outside"), "{why}");
}

/// A trace stream whose reader saw a point sent `ago`: the program's calls
/// may have waited that long for its tracer.
fn read_a_point_sent(clock: &mut StreamClock, ago: Duration) {
    let sent = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - ago;
    clock.read(Some(i64::try_from(sent.as_nanos()).unwrap()), true);
}

#[tokio::test(start_paused = true)]
async fn time_its_calls_waited_for_the_tracer_is_given_back() {
    for (exits_after, killed) in [(ms(1300), false), (ms(3000), true)] {
        let mut setup = Setup::new();
        let tracer = setup.tracer.insert(TracerHold::new()).clone();
        // The trace socket, empty: nothing is pending on the reader.
        let (socket, _peer) = UnixStream::pair().unwrap();
        let mut clock = StreamClock::connected(tracer, socket.as_raw_fd());
        let program = exits(exits_after, 0);
        let (watched, ()) = tokio::join!(setup.watch(&program), async {
            // Once it runs, a point it sent 600 ms ago is read.
            program.running.notified().await;
            read_a_point_sent(&mut clock, ms(600));
        });
        let watched = watched.expect("no fault");
        drop(clock);
        if killed {
            // Given the 600 ms back, and no more: killed at about 1.6 s.
            assert_eq!(watched.exit, Some(137));
            assert!(
                watched.duration >= ms(1600) && watched.duration < ms(1700),
                "{:?}",
                watched.duration
            );
            let why = unproven_wall_kill(&watched);
            assert!(why.contains("for its behaviour tracer"), "{why}");
        } else {
            // 1.3 s of a 1 s limit, 0.6 s of which were the tracer's.
            assert_eq!(watched.exit, Some(0));
            assert!(watched.killed.is_none());
            assert_eq!(watched.duration, exits_after);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_call_kills_the_program_and_reports_no_run() {
    let setup = Setup::new();
    let program = Scripted::start(Script::default());
    let (watched, ()) = tokio::join!(setup.watch(&program), async {
        program.running.notified().await;
        setup.token.cancel();
    });
    let watched = watched.expect("no fault");
    // Neither an exit nor a timeout: nothing about the program is known.
    assert!(watched.exit.is_none());
    assert!(watched.killed.is_none());
    assert!(watched.confirm.is_none());
    assert!(watched.usage.is_none());
    assert_eq!(watched.duration, Duration::ZERO);
    assert_eq!(program.calls(), [Call::Wait, Call::KillCancelled]);
    assert!(
        program.started.elapsed() < LIMIT,
        "not held until its limit"
    );
    assert_eq!(setup.load.now(), 0);
}

#[tokio::test(start_paused = true)]
async fn output_that_ends_early_is_accepted_when_the_backend_believes_it() {
    let setup = Setup::new();
    // It closed its streams and went on for a while.
    let program = exits(ms(200), 0);
    let watched = setup
        .watch_output(&program, async { Ok(()) })
        .await
        .expect("an end the backend believes is no fault");
    assert_eq!(watched.exit, Some(0));
    assert_eq!(watched.duration, ms(200), "its exit was still waited for");
    assert_eq!(program.calls(), [Call::Wait, Call::OutputEnded]);
}

#[tokio::test(start_paused = true)]
async fn output_cut_before_the_program_ended_is_a_fault_not_its_outcome() {
    let setup = Setup::new();
    // The backend disbelieves a clean-looking end (its connection was cut).
    let program = Scripted::start(Script {
        exits_after: Some((ms(200), 0)),
        output_cut: Some("the connection carrying it was cut".into()),
        ..Script::default()
    });
    let fault = setup
        .watch_output(&program, async { Ok(()) })
        .await
        .err()
        .expect("cut output is a fault");
    assert_eq!(fault, "output fault: the connection carrying it was cut");
    assert!(!program.calls().contains(&Call::Kill));
    // The stream itself failing, passed on as the backend's default does.
    let program = exits(ms(200), 0);
    let fault = setup
        .watch_output(&program, async { Err("stdout: broken pipe".to_string()) })
        .await
        .err()
        .expect("a failed stream is a fault");
    assert_eq!(fault, "output fault: stdout: broken pipe");
}

#[tokio::test(start_paused = true)]
async fn output_that_never_ends_after_the_exit_is_a_fault_naming_the_container() {
    let setup = Setup::new();
    let program = exits(ms(100), 0);
    let fault = setup
        .watch_output(&program, std::future::pending())
        .await
        .err()
        .expect("output held open past the bound is a fault");
    assert!(
        fault.starts_with("output fault: ")
            && fault.contains("progscore-test-0")
            && fault.contains("did not end within 5s of its exit"),
        "{fault}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_program_that_ended_by_itself_as_the_limit_fired_keeps_its_own_exit() {
    let setup = Setup::new();
    // Its wait had not told yet, but it was no longer running at the limit.
    let program = Scripted::start(Script {
        ended_at_limit: Some(0),
        ..Script::default()
    });
    let mut watched = setup.watch(&program).await.expect("no fault");
    assert_eq!(watched.exit, Some(0));
    assert!(watched.killed.is_none(), "not progscore's kill");
    assert_eq!(watched.duration, LIMIT);
    assert_eq!(program.calls(), [Call::Wait, Call::Ended], "never killed");
    assert_eq!(watched.outcome(0), Outcome::Exited { exit_code: 0 });
}

#[tokio::test(start_paused = true)]
async fn an_exit_that_beat_the_kill_is_the_programs_own() {
    let setup = Setup::new();
    // Killed at the limit, but it had exited 0 just before the kill landed.
    let program = Scripted::start(Script {
        killed_exit: Some(0),
        ..Script::default()
    });
    let mut watched = setup.watch(&program).await.expect("no fault");
    assert_eq!(watched.exit, Some(0));
    assert!(watched.killed.is_some());
    assert_eq!(watched.outcome(0), Outcome::Exited { exit_code: 0 });
    assert!(watched.confirm.is_none(), "an exit confirms nothing");
}

#[tokio::test(start_paused = true)]
async fn a_fault_while_waiting_is_the_backends_and_kills_nothing() {
    let setup = Setup::new();
    let program = Scripted::start(Script {
        wait_fault: Some("the engine went away".into()),
        ..Script::default()
    });
    let fault = setup.watch(&program).await.err().expect("a fault");
    assert_eq!(fault, "the engine went away");
    assert_eq!(program.calls(), [Call::Wait]);
    assert_eq!(setup.load.now(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_program_seen_ended_before_its_window_is_not_waited_for() {
    let setup = Setup::new();
    let program = Scripted::start(Script::default());
    program.finish(5);
    let last_output = Mutex::new(None);
    let watched = setup
        .window()
        .watch(
            &program,
            unmeasured,
            program.output(),
            &last_output,
            Some(5),
        )
        .await
        .expect("no fault");
    assert_eq!(watched.exit, Some(5));
    assert!(watched.killed.is_none());
    assert_eq!(watched.duration, Duration::ZERO);
    assert!(program.calls().is_empty(), "{:?}", program.calls());
}
