//! `progscore serve`: the HTTP service over the same runtime (see the
//! progscore-server crate and docs/serve.md).

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use progscore_runtime::config::Config;
use progscore_server::{ServeSettings, Server};
use tokio_util::sync::CancellationToken;

use super::{EXIT_ERROR, EXIT_OK, Terminations};

#[derive(Debug, Parser)]
pub struct ServeArgs {
    /// The address and port to listen on (default: `[serve] listen`, else
    /// 127.0.0.1:8080). Any address but loopback needs `[serve] tokens`.
    #[arg(long)]
    listen: Option<SocketAddr>,
}

pub async fn serve(config: &Config, args: ServeArgs) -> anyhow::Result<u8> {
    // Caught before anything is created, so no signal can leave a container.
    let signals = Terminations::install();
    let mut settings = ServeSettings::from_config(config)?;
    if let Some(listen) = args.listen {
        settings.listen = listen;
    }
    let listen = settings.listen;
    // Bound first: a port in use is said before the preflight's work.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let server = match Server::build(config.clone(), settings, super::wasi_workers()).await {
        Ok(server) => server,
        Err(err) => {
            eprintln!("progscore: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    let served = server.state().served_names().join(", ");
    let address = listener.local_addr().unwrap_or(listen);
    eprintln!("progscore: serving {served} on http://{address}");
    // The first SIGTERM/SIGINT/SIGHUP drains; a second exits at once (what
    // is left is swept by the next start, as after a crash).
    let stop = CancellationToken::new();
    let (signal_task, received) = signals.cancel_on_signal(stop.clone());
    let shutdown = {
        let received = received.clone();
        async move {
            stop.cancelled().await;
            if let Some(signal) = received.get() {
                eprintln!(
                    "progscore: {}: draining (a second signal exits at once)",
                    signal.name
                );
            }
        }
    };
    server.serve(listener, shutdown).await?;
    signal_task.abort();
    eprintln!("progscore: stopped; every run ended and was cleaned up");
    Ok(EXIT_OK)
}
