//! The `progscore` binary: parses arguments, loads the config, dispatches.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The WASI backend re-runs this executable as its worker processes.
    if let Some(code) = progscore_runtime::backends::run_wasi_worker_if_requested() {
        return code;
    }
    // A closed pipe ends progscore only when it is its own standard output
    // (`progscore profiles | head`), quietly, as other command-line tools do.
    // Any other closed pipe (a program's stdin it did not read, a worker that
    // died, an engine's connection) is an error the write returns.
    // SAFETY: installs a handler that only calls async-signal-safe functions,
    // before any thread starts.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigpipe as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGPIPE, &action, std::ptr::null_mut());
    }
    let args = cli::Args::parse();
    // The server logs each request (id, route, status, time) by default.
    let default_log = match args.command {
        cli::Command::Serve(_) => "warn,progscore_server=info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PROGSCORE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_log)),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never when NO_COLOR is set
        // (https://no-color.org): a log file or pipe gets plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("progscore: cannot start the async runtime: {err}");
            return ExitCode::from(cli::EXIT_ERROR);
        }
    };
    let code = runtime.block_on(cli::dispatch(args));
    ExitCode::from(code)
}

/// SIGPIPE: the write that raised it gets EPIPE, unless progscore's own
/// standard output is the broken pipe; then progscore dies of the signal, as
/// with its default action (status 141 in a shell, nothing printed).
extern "C" fn on_sigpipe(_: libc::c_int) {
    let mut stdout = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: poll, signal and raise are async-signal-safe; `stdout` is a
    // valid pollfd. The raised signal is blocked inside this handler and
    // delivered, with its default action, when the handler returns.
    unsafe {
        if libc::poll(&mut stdout, 1, 0) == 1
            && stdout.revents & (libc::POLLERR | libc::POLLHUP) != 0
        {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
}
