//! `progscore doctor`: is each backend usable, and if not, why.

use clap::Parser;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;

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
        config.oci.clone(),
        super::wasi_workers(),
    )?;
    let docker = backends.docker_report().await;
    let checks = |report: Vec<(String, Result<String, progscore_sandbox::SandboxError>)>| {
        report
            .into_iter()
            .map(|(profile, result)| match result {
                Ok(detail) => serde_json::json!({"profile": profile, "ok": true, "detail": detail}),
                Err(err) => {
                    serde_json::json!({"profile": profile, "ok": false, "detail": err.to_string()})
                }
            })
            .collect::<Vec<serde_json::Value>>()
    };
    let wasi = checks(backends.wasi_report().await);
    // Listed before the profiles' checks (which rebuild a changed image
    // they use) to catch a change, and after them to show the cache as it is.
    let found_before = backends.oci_cache().await.unwrap_or_default();
    let oci = checks(backends.oci_report().await);
    let cache: Vec<serde_json::Value> = backends
        .oci_cache()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|image| {
            // The same image: a changed tree is rebuilt as a new
            // generation beside it (another folder), never in place.
            let before = found_before
                .iter()
                .find(|b| b.manifest_digest == image.manifest_digest)
                .map_or(&[][..], |b| &b.problems[..]);
            let problems: Vec<&String> = before.iter().chain(&image.problems).collect();
            serde_json::json!({
                "dir": image.dir,
                "reference": image.reference,
                "manifest_digest": image.manifest_digest,
                "unpacked_bytes": image.unpacked_bytes,
                "ok": problems.is_empty(),
                "problems": problems,
                "rebuilt": !before.is_empty() && image.is_intact(),
            })
        })
        .collect();
    // Every configured engine must be usable: one that is down or refuses
    // a profile is a problem even when another engine can run it.
    let healthy = docker
        .iter()
        .flatten()
        .all(|r| r.engine_ok && r.profiles.iter().all(|p| p.ok))
        && wasi
            .iter()
            .chain(&oci)
            .chain(&cache)
            .all(|w| w["ok"] == true);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "ok": healthy, "docker": docker, "wasi": wasi, "oci": oci, "oci_cache": cache
            }))?
        );
    } else if let Some(reports) = &docker {
        for report in reports {
            let capacity = match report.capacity {
                Some(n) => format!(", {n} programs at once"),
                None => String::new(),
            };
            if reports.len() == 1 && report.name == progscore_runtime::backends::DEFAULT_ENGINE_NAME
            {
                println!("docker engine: {} at {}", report.engine, report.endpoint);
            } else {
                println!(
                    "docker engine `{}`: {} at {}{capacity}",
                    report.name, report.engine, report.endpoint
                );
            }
            if !report.runtimes.is_empty() {
                println!("  runtimes: {}", report.runtimes.join(", "));
            }
            for problem in &report.problems {
                println!("  problem: {problem}");
            }
            if let Some(timing) = &report.timing {
                println!("  timing: {timing}");
            }
            for check in &report.profiles {
                let mark = if check.ok { "ok  " } else { "FAIL" };
                println!("  [{mark}] profile {}: {}", check.profile, check.detail);
            }
        }
    } else {
        println!("no docker profiles configured");
    }
    for (title, report) in [
        ("wasi (in-process wasmtime, no daemon):", &wasi),
        ("oci (runc or runsc run directly, no daemon):", &oci),
    ] {
        if args.json || report.is_empty() {
            continue;
        }
        println!("{title}");
        for check in report {
            let mark = if check["ok"] == true { "ok  " } else { "FAIL" };
            println!(
                "  [{mark}] profile {}: {}",
                check["profile"].as_str().unwrap_or(""),
                check["detail"].as_str().unwrap_or("")
            );
        }
    }
    if !args.json && !oci.is_empty() {
        println!("oci image cache ({} unpacked):", cache.len());
        for image in &cache {
            let name = image["reference"]
                .as_str()
                .or(image["dir"].as_str())
                .unwrap_or("");
            let bytes = image["unpacked_bytes"].as_u64().unwrap_or(0);
            let size = format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0));
            match image["problems"].as_array().filter(|p| !p.is_empty()) {
                None => println!(
                    "  [ok  ] {name}: manifest {}, {size}, tree intact",
                    image["manifest_digest"].as_str().unwrap_or("?")
                ),
                Some(problems) => {
                    let problems: Vec<&str> = problems.iter().filter_map(|p| p.as_str()).collect();
                    let then = if image["rebuilt"] == true {
                        "rebuilt by this check"
                    } else {
                        "the next run that uses it rebuilds it"
                    };
                    println!("  [FAIL] {name}: {}; {then}", problems.join("; "));
                }
            }
        }
    }
    Ok(if healthy { EXIT_OK } else { EXIT_FAILED })
}
