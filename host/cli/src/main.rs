//! The `progscore` binary: parses arguments, loads the config, dispatches.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The WASI backend re-runs this executable as its worker processes.
    if let Some(code) = progscore_wasi::worker::run_if_requested() {
        return code;
    }
    // Die quietly on a closed pipe (`progscore profiles | head`) like other
    // command-line tools, instead of panicking in println!.
    // SAFETY: setting a signal disposition to the default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PROGSCORE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never when NO_COLOR is set
        // (https://no-color.org): a log file or pipe gets plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    let args = cli::Args::parse();
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
