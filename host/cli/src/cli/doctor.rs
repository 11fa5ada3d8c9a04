//! `progscore doctor`: is each backend usable, and if not, why.

use clap::Parser;
use progscore::backends::Backends;
use progscore::config::Config;

use super::{EXIT_FAILED, EXIT_OK};

#[derive(Debug, Parser)]
pub struct DoctorArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(config: &Config, args: DoctorArgs) -> anyhow::Result<u8> {
    let backends = Backends::build(
        config.profiles.clone(),
        config.docker.options(),
        super::wasi_workers(),
    )?;
    let docker = backends.docker_report().await;
    let wasi: Vec<serde_json::Value> = backends
        .wasi_report()
        .await
        .into_iter()
        .map(|(profile, result)| match result {
            Ok(detail) => serde_json::json!({"profile": profile, "ok": true, "detail": detail}),
            Err(err) => {
                serde_json::json!({"profile": profile, "ok": false, "detail": err.to_string()})
            }
        })
        .collect();
    let healthy = docker
        .as_ref()
        .is_none_or(|r| r.engine_ok && r.profiles.iter().all(|p| p.ok))
        && wasi.iter().all(|w| w["ok"] == true);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"ok": healthy, "docker": docker, "wasi": wasi})
            )?
        );
    } else if let Some(report) = &docker {
        println!("docker engine: {}", report.engine);
        if !report.runtimes.is_empty() {
            println!("  runtimes: {}", report.runtimes.join(", "));
        }
        for problem in &report.problems {
            println!("  problem: {problem}");
        }
        for check in &report.profiles {
            let mark = if check.ok { "ok  " } else { "FAIL" };
            println!("  [{mark}] profile {}: {}", check.profile, check.detail);
        }
    } else {
        println!("no docker profiles configured");
    }
    if !args.json && !wasi.is_empty() {
        println!("wasi (in-process wasmtime, no daemon):");
        for check in &wasi {
            let mark = if check["ok"] == true { "ok  " } else { "FAIL" };
            println!(
                "  [{mark}] profile {}: {}",
                check["profile"].as_str().unwrap_or(""),
                check["detail"].as_str().unwrap_or("")
            );
        }
    }
    Ok(if healthy { EXIT_OK } else { EXIT_FAILED })
}
