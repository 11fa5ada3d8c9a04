//! A WASI worker process for progscore: runs guests sent by a `WasiClient` on
//! its stdin, one at a time, and answers on its stdout.

fn main() -> std::process::ExitCode {
    progscore_wasi::worker::worker_main()
}
