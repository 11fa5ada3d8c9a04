//! `progscore profiles`: what is configured, and its fingerprint.

use clap::Parser;
use progscore_runtime::config::Config;
use progscore_sandbox::Artifact;

use super::EXIT_OK;

#[derive(Debug, Parser)]
pub struct ProfilesArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(config: &Config, args: ProfilesArgs) -> anyhow::Result<u8> {
    if args.json {
        let profiles: Vec<_> = config
            .profiles
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name,
                    "fingerprint": p.fingerprint(),
                    "profile": p,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&profiles)?);
        return Ok(EXIT_OK);
    }
    if config.profiles.is_empty() {
        println!("no profiles in {}", config.path.display());
    }
    for p in &config.profiles {
        let artifact = match &p.artifact {
            Artifact::DockerImage { image } => image.to_string(),
            Artifact::WasmModule { module, .. } => {
                format!("{} (sha256 {})", module.path.display(), module.sha256)
            }
        };
        println!("{}", p.name);
        println!("  backend      {}", p.backend);
        println!("  artifact     {artifact}");
        println!(
            "  runtime      {}",
            p.runtime.as_deref().unwrap_or("(engine default)")
        );
        if p.backend == progscore_sandbox::Backend::Docker {
            println!("  engines      {}", engines_line(config, p));
        }
        if p.source.is_some() || p.compile.is_some() {
            println!("  program at   {}", p.program_path());
        }
        if let Some(compile) = &p.compile {
            println!("  compile      {}", compile.command.join(" "));
            println!("  compile lim. {}", limits_line(&compile.limits));
        }
        println!("  command      {}", p.command.join(" "));
        println!("  limits       {}", limits_line(&p.limits));
        println!("  fingerprint  {}", p.fingerprint());
    }
    Ok(EXIT_OK)
}

/// The engines a Docker profile may run on, as configured (`doctor` says
/// which of them can).
fn engines_line(config: &Config, profile: &progscore_sandbox::RuntimeProfile) -> String {
    let configured: Vec<&str> = config
        .docker
        .engines
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    match (profile.engines.is_empty(), configured.is_empty()) {
        (false, _) => profile.engines.join(", "),
        (true, true) => "the implicit engine (DOCKER_HOST or /var/run/docker.sock)".into(),
        (true, false) => format!("every engine that can run it: {}", configured.join(", ")),
    }
}

fn limits_line(limits: &progscore_sandbox::Limits) -> String {
    format!(
        "memory {} B, cpus {}, pids {}, timeout {} ms, output {} B/stream",
        limits.memory_bytes, limits.cpus, limits.pids, limits.timeout_ms, limits.output_bytes
    )
}
