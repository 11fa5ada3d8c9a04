//! `progscore profiles`: what is configured, and its fingerprint.

use clap::Parser;
use progscore::config::Config;
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
        println!("  command      {}", p.command.join(" "));
        println!(
            "  limits       memory {} B, cpus {}, pids {}, timeout {} ms, output {} B/stream",
            p.limits.memory_bytes,
            p.limits.cpus,
            p.limits.pids,
            p.limits.timeout_ms,
            p.limits.output_bytes
        );
        println!("  fingerprint  {}", p.fingerprint());
    }
    Ok(EXIT_OK)
}
