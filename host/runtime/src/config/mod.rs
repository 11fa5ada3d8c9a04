//! The TOML configuration, turned into typed values once, at the edge.
//! What is wrong in it is told with the file and line ([`located`], whose
//! helpers the faces' own tables use too: `[serve]` is the server's to read,
//! from [`Config::text`]).

mod located;
pub mod retention;

pub use located::{ConfigError, bounded_duration, locate, locate_key};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use progscore_sandbox::{ProfileSpec, RuntimeProfile};
use serde::Deserialize;

/// The config file's name when none is given.
pub const DEFAULT_CONFIG: &str = "progscore.toml";

/// A loaded, checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// The evidence store's path (resolved against the config's folder).
    pub store_path: PathBuf,
    /// Every profile, checked.
    pub profiles: Vec<RuntimeProfile>,
    /// User comparators, pinned by sha256.
    pub comparators: Vec<UserComparator>,
    /// How the Docker backend bounds the engine's work (`[docker]`).
    pub docker: DockerSettings,
    /// Where the OCI backend keeps its image cache, and its bounds (`[oci]`).
    pub oci: progscore_oci::OciOptions,
    /// Other names for profiles, as the ecosystem spells languages
    /// (`[languages]`: `cs = "csharp"`, `nodejs = "javascript"`); each names a
    /// configured profile. A profile's own name always works besides.
    pub languages: BTreeMap<String, String>,
    /// The file's text as loaded: the tables a face reads itself (the
    /// server's `[serve]`) are read from it, their errors named by line.
    pub text: String,
}

/// The `[docker]` section (bounds on the engines' work, never the
/// program's) and the `[engines]` tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerSettings {
    /// Bound on each engine request (`engine_timeout`, default 2m).
    pub engine_timeout: Duration,
    /// How long a run waits for engines that stopped answering
    /// (`outage_wait`, default 2m).
    pub outage_wait: Duration,
    /// The configured engines, in the file's order; empty: the implicit
    /// one (`DOCKER_HOST` or the local socket).
    pub engines: Vec<progscore_docker::EngineOptions>,
}

impl Default for DockerSettings {
    fn default() -> Self {
        DockerSettings {
            engine_timeout: progscore_docker::DEFAULT_ENGINE_TIMEOUT,
            outage_wait: progscore_docker::DEFAULT_OUTAGE_WAIT,
            engines: Vec::new(),
        }
    }
}

impl DockerSettings {
    /// The Docker backend's options: these bounds and engines, the rest as
    /// default.
    pub fn options(&self) -> progscore_docker::DockerOptions {
        let defaults = progscore_docker::DockerOptions::default();
        progscore_docker::DockerOptions {
            engine_timeout: self.engine_timeout,
            outage_wait: self.outage_wait,
            engines: if self.engines.is_empty() {
                defaults.engines.clone()
            } else {
                self.engines.clone()
            },
            ..defaults
        }
    }
}

/// A user comparator as configured: a component file pinned by sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserComparator {
    /// The name expectations use.
    pub name: String,
    /// The component file (resolved against the config's folder).
    pub path: PathBuf,
    /// Its expected sha256.
    pub sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    store: StoreSection,
    #[serde(default)]
    profiles: BTreeMap<String, ProfileSpec>,
    #[serde(default)]
    comparators: BTreeMap<String, ComparatorSection>,
    #[serde(default)]
    docker: DockerSection,
    #[serde(default)]
    oci: OciSection,
    /// The server's (`progscore_server::ServeSettings` reads and checks it).
    #[serde(default, rename = "serve")]
    _serve: toml::Table,
    /// Kept in the file's order: the first engine is preferred when engines
    /// are equally free.
    #[serde(default)]
    engines: toml::Table,
    #[serde(default)]
    languages: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineSection {
    url: String,
    tls: Option<TlsSection>,
    ssh_key: Option<PathBuf>,
    capacity: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsSection {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct OciSection {
    image_cache: Option<PathBuf>,
    runtime_timeout: Option<String>,
    http_registries: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DockerSection {
    engine_timeout: Option<String>,
    outage_wait: Option<String>,
    /// Programs per CPU an engine reports, for engines without `capacity`.
    calls_per_cpu: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    #[serde(default = "default_store_path")]
    path: PathBuf,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            path: default_store_path(),
        }
    }
}

fn default_store_path() -> PathBuf {
    PathBuf::from("progscore.db")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ComparatorSection {
    path: PathBuf,
    sha256: String,
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            cause: source,
        })?;
        Config::parse(path, &text)
    }

    /// Parses config text that came from `path` (used for messages and to
    /// resolve relative paths).
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let file: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: shown.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut profiles = Vec::new();
        for (name, spec) in &file.profiles {
            let profile = RuntimeProfile::from_spec(name, spec, base).map_err(|e| {
                // A limit is found on its own line, in `[profiles.NAME.limits]`.
                let location = match &e {
                    progscore_sandbox::ProfileError::BadLimit { section, field, .. } => {
                        locate_key(&shown, text, &format!("profiles.{name}.{section}"), field)
                            .unwrap_or_else(|| locate(&shown, text, &format!("profiles.{name}")))
                    }
                    _ => locate(&shown, text, &format!("profiles.{name}")),
                };
                ConfigError::Profile {
                    location,
                    message: e.to_string(),
                }
            })?;
            profiles.push(profile);
        }
        let mut comparators = Vec::new();
        for (name, section) in file.comparators {
            if !progscore_sandbox::is_sha256_hex(&section.sha256) {
                return Err(ConfigError::Profile {
                    location: locate(&shown, text, &format!("comparators.{name}")),
                    message: format!(
                        "comparator `{name}`: sha256 {:?} is not 64 lower-case hex digits",
                        section.sha256
                    ),
                });
            }
            comparators.push(UserComparator {
                path: if section.path.is_absolute() {
                    section.path
                } else {
                    base.join(section.path)
                },
                name,
                sha256: section.sha256,
            });
        }
        let mut docker = DockerSettings::default();
        for (field, value, target, max) in [
            (
                "engine_timeout",
                &file.docker.engine_timeout,
                &mut docker.engine_timeout,
                MAX_ENGINE_TIMEOUT,
            ),
            (
                "outage_wait",
                &file.docker.outage_wait,
                &mut docker.outage_wait,
                MAX_OUTAGE_WAIT,
            ),
        ] {
            let Some(value) = value else { continue };
            *target = bounded_duration(&shown, text, "docker", field, value, max)?;
        }
        docker.engines =
            parse_engines(&shown, text, base, &file.engines, file.docker.calls_per_cpu)?;
        if let Some(per_cpu) = file.docker.calls_per_cpu
            && per_cpu == 0
        {
            return Err(ConfigError::Profile {
                location: locate(&shown, text, "docker"),
                message: "docker.calls_per_cpu = 0: give at least 1".into(),
            });
        }
        for profile in &profiles {
            let unknown = profile
                .engines
                .iter()
                .find(|name| !docker.engines.iter().any(|e| &e.name == *name));
            let problem = match unknown {
                _ if file.profiles[&profile.name].engines.as_ref().is_some_and(Vec::is_empty) => {
                    Some("`engines = []` names no engine: name at least one, or remove it to use every engine".to_string())
                }
                Some(name) if docker.engines.is_empty() => Some(format!(
                    "`engines` names `{name}`, but the config has no [engines] table"
                )),
                Some(name) => Some(format!(
                    "`engines` names `{name}`, which is not configured (configured: {})",
                    docker
                        .engines
                        .iter()
                        .map(|e| e.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                None => None,
            };
            if let Some(problem) = problem {
                return Err(ConfigError::Profile {
                    location: locate(&shown, text, &format!("profiles.{}", profile.name)),
                    message: format!("profile `{}`: {problem}", profile.name),
                });
            }
        }
        let mut oci = progscore_oci::OciOptions::default();
        if let Some(cache) = file.oci.image_cache {
            oci.image_cache = if cache.is_absolute() {
                cache
            } else {
                base.join(cache)
            };
        }
        if let Some(value) = &file.oci.runtime_timeout {
            oci.runtime_timeout = bounded_duration(
                &shown,
                text,
                "oci",
                "runtime_timeout",
                value,
                MAX_RUNTIME_TIMEOUT,
            )?;
        }
        if let Some(registries) = file.oci.http_registries {
            oci.http_registries = registries;
        }
        let store_path =
            if file.store.path.is_absolute() || file.store.path == Path::new(":memory:") {
                file.store.path
            } else {
                base.join(file.store.path)
            };
        let languages = check_languages(&shown, text, &profiles, file.languages)?;
        Ok(Config {
            path: path.to_path_buf(),
            store_path,
            profiles,
            comparators,
            docker,
            oci,
            languages,
            text: text.to_string(),
        })
    }

    /// A profile by name.
    pub fn profile(&self, name: &str) -> Option<&RuntimeProfile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// The profile a language name stands for: a profile's own name, else
    /// an entry of `[languages]`.
    pub fn language_profile(&self, name: &str) -> Option<&RuntimeProfile> {
        self.profile(name)
            .or_else(|| self.languages.get(name).and_then(|p| self.profile(p)))
    }

    /// Every name a caller may give for a language: the profiles' own names
    /// and the `[languages]` entries, sorted, each once.
    pub fn language_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .profiles
            .iter()
            .map(|p| p.name.as_str())
            .chain(self.languages.keys().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// The `[languages]` table, checked: every entry names a configured profile,
/// and none gives a profile's own name to another profile.
fn check_languages(
    shown: &str,
    text: &str,
    profiles: &[RuntimeProfile],
    languages: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let names = || {
        profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (name, profile) in &languages {
        let location = || {
            locate_key(shown, text, "languages", name)
                .unwrap_or_else(|| locate(shown, text, "languages"))
        };
        if name.is_empty() {
            return Err(ConfigError::Profile {
                location: location(),
                message: "languages: an empty name".into(),
            });
        }
        if !profiles.iter().any(|p| &p.name == profile) {
            return Err(ConfigError::Profile {
                location: location(),
                message: format!(
                    "languages.{name} = {profile:?} names no configured profile (configured: {})",
                    names()
                ),
            });
        }
        if name != profile && profiles.iter().any(|p| &p.name == name) {
            return Err(ConfigError::Profile {
                location: location(),
                message: format!(
                    "languages.{name} = {profile:?}: `{name}` is a profile's own name; a profile's name always means that profile"
                ),
            });
        }
    }
    Ok(languages)
}

/// The `[engines.NAME]` tables, in the file's order, checked.
fn parse_engines(
    shown: &str,
    text: &str,
    base: &Path,
    tables: &toml::Table,
    calls_per_cpu: Option<usize>,
) -> Result<Vec<progscore_docker::EngineOptions>, ConfigError> {
    let resolve = |path: PathBuf| {
        if path.is_absolute() {
            path
        } else {
            base.join(path)
        }
    };
    let mut engines = Vec::new();
    for (name, value) in tables {
        let location = || locate(shown, text, &format!("engines.{name}"));
        let refuse = |message: String| ConfigError::Profile {
            location: location(),
            message: format!("engine `{name}`: {message}"),
        };
        let section: EngineSection =
            serde_path_to_error::deserialize(value.clone()).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner().to_string();
                // "unknown field `x`" already names it.
                if path == "." || inner.contains(&format!("`{path}`")) {
                    refuse(inner)
                } else {
                    refuse(format!("{path}: {inner}"))
                }
            })?;
        let tls = section.tls.map(|tls| progscore_docker::TlsFiles {
            ca: resolve(tls.ca),
            cert: resolve(tls.cert),
            key: resolve(tls.key),
        });
        let endpoint =
            progscore_docker::Endpoint::parse(&section.url, tls, section.ssh_key.map(resolve))
                .map_err(|e| refuse(format!("url: {e}")))?;
        let capacity = match section.capacity {
            Some(0) => return Err(refuse("capacity = 0: give at least 1".into())),
            Some(n) => progscore_docker::Capacity::Fixed(n),
            None => progscore_docker::Capacity::PerCpu(
                calls_per_cpu.unwrap_or(progscore_docker::DEFAULT_CALLS_PER_CPU),
            ),
        };
        engines.push(progscore_docker::EngineOptions {
            name: name.clone(),
            endpoint,
            capacity,
        });
    }
    Ok(engines)
}

/// The longest `[docker] engine_timeout`: one engine request. Bounds are
/// derived from it (a call's cleanup waits a few of them), so it stays far
/// from where adding it to a clock could overflow.
pub const MAX_ENGINE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// The longest `[docker] outage_wait`: how long runs wait for engines that
/// stopped answering.
pub const MAX_OUTAGE_WAIT: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest `[oci] runtime_timeout`: one runtime command.
pub const MAX_RUNTIME_TIMEOUT: Duration = Duration::from_secs(60 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "127.0.0.1:5000/python-sandbox@sha256:04523e07d3e8eff083d854274411456f0a069de00b901a826c97a9428f7bbac4";

    #[test]
    fn a_tagged_image_is_refused_with_file_line_and_profile() {
        let text = format!(
            "[store]\npath = \"x.db\"\n\n[profiles.good]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n\n[profiles.bad]\nbackend = \"docker\"\nimage = \"python:3.12\"\ncommand = [\"python3\"]\n"
        );
        let err = Config::parse(Path::new("conf/progscore.toml"), &text).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("conf/progscore.toml:9: profile `bad`"),
            "{message}"
        );
        assert!(message.contains("python:3.12"), "{message}");
    }

    #[test]
    fn language_names_stand_for_profiles_and_bad_ones_name_their_line() {
        let profiles = format!(
            "[profiles.python]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n[profiles.cpp]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"/build/main\"]\n"
        );
        let good = format!("{profiles}[languages]\npy = \"python\"\n\"c++\" = \"cpp\"\n");
        let config = Config::parse(Path::new("c.toml"), &good).unwrap();
        assert_eq!(config.language_profile("py").unwrap().name, "python");
        assert_eq!(config.language_profile("c++").unwrap().name, "cpp");
        assert_eq!(config.language_profile("cpp").unwrap().name, "cpp");
        assert!(config.language_profile("ruby").is_none());
        assert_eq!(config.language_names(), ["c++", "cpp", "py", "python"]);

        let unknown = format!("{profiles}[languages]\npy = \"python\"\nrb = \"ruby\"\n");
        let message = Config::parse(Path::new("c.toml"), &unknown)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("c.toml:11: languages.rb = \"ruby\" names no configured profile")
                && message.contains("configured: cpp, python"),
            "{message}"
        );

        let shadowing = format!("{profiles}[languages]\npython = \"cpp\"\n");
        let message = Config::parse(Path::new("c.toml"), &shadowing)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("c.toml:10: languages.python")
                && message.contains("a profile's own name"),
            "{message}"
        );
    }

    #[test]
    fn unknown_fields_name_the_line() {
        let text = format!(
            "[profiles.p]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n[profiles.p.limits]\nmemroy = \"1GiB\"\n"
        );
        let message = Config::parse(Path::new("c.toml"), &text)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("c.toml") && message.contains("line 6") && message.contains("memroy"),
            "{message}"
        );
    }

    #[test]
    fn durations_beyond_their_bounds_are_refused_naming_the_line_and_field() {
        let cases = [
            (
                "[docker]\nengine_timeout = \"30s\"\noutage_wait = \"999999999999s\"\n",
                "conf/progscore.toml:3: docker.outage_wait = \"999999999999s\": must be between 1s and 1day",
            ),
            (
                "[docker]\nengine_timeout = \"999999999999s\"\n",
                "conf/progscore.toml:2: docker.engine_timeout = \"999999999999s\": must be between 1s and 1h",
            ),
            (
                "[store]\npath = \"x.db\"\n\n[oci]\nruntime_timeout = \"18446744073709551615s\"\n",
                "conf/progscore.toml:5: oci.runtime_timeout = \"18446744073709551615s\": must be between 1s and 1h",
            ),
            (
                &format!(
                    "[profiles.py]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n\n[profiles.py.limits]\nmemory = \"64MiB\"\ntimeout = \"999999999999s\"\n"
                ),
                "conf/progscore.toml:8: profile `py`: limits.timeout = \"999999999999s\": must be between 100ms and 1h",
            ),
        ];
        for (text, expected) in cases {
            let message = Config::parse(Path::new("conf/progscore.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(message.starts_with(expected), "{message}\nnot: {expected}");
        }
        // The largest values accepted still make every bound derived from
        // them (cleanup waits, deadlines on the clock) without overflow.
        let config = Config::parse(
            Path::new("conf/progscore.toml"),
            "[docker]\nengine_timeout = \"1h\"\noutage_wait = \"1day\"\n[oci]\nruntime_timeout = \"1h\"\n",
        )
        .unwrap();
        assert_eq!(config.docker.engine_timeout, MAX_ENGINE_TIMEOUT);
        assert_eq!(config.docker.outage_wait, MAX_OUTAGE_WAIT);
        assert_eq!(config.oci.runtime_timeout, MAX_RUNTIME_TIMEOUT);
    }

    #[test]
    fn engine_bounds_are_read_and_bad_ones_named() {
        let text = format!(
            "[docker]\nengine_timeout = \"30s\"\noutage_wait = \"5m\"\n[profiles.p]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n"
        );
        let config = Config::parse(Path::new("c.toml"), &text).unwrap();
        assert_eq!(config.docker.engine_timeout, Duration::from_secs(30));
        assert_eq!(config.docker.outage_wait, Duration::from_secs(300));
        let bad = text.replace("\"30s\"", "\"soon\"");
        let message = Config::parse(Path::new("c.toml"), &bad)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("c.toml:2: docker.engine_timeout = \"soon\""),
            "{message}"
        );
        let none = Config::parse(Path::new("c.toml"), "").unwrap();
        assert_eq!(none.docker, DockerSettings::default());
        assert_eq!(none.oci.image_cache, Path::new("/var/cache/progscore/oci"));
    }

    #[test]
    fn engines_are_read_in_the_files_order_with_their_capacity_and_tls_files() {
        use progscore_docker::{Capacity, Endpoint};
        let text = format!(
            "[docker]\ncalls_per_cpu = 2\n\n[engines.zeta]\nurl = \"unix:///run/z.sock\"\n\n\
             [engines.alpha]\nurl = \"tcp://10.0.0.2:2376\"\ncapacity = 5\n\
             tls = {{ ca = \"tls/ca.pem\", cert = \"tls/cert.pem\", key = \"/keys/key.pem\" }}\n\n\
             [profiles.p]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n\
             engines = [\"alpha\"]\n"
        );
        let config = Config::parse(Path::new("/etc/ps/c.toml"), &text).unwrap();
        let engines = &config.docker.engines;
        assert_eq!(
            engines.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["zeta", "alpha"]
        );
        assert_eq!(engines[0].capacity, Capacity::PerCpu(2));
        assert_eq!(engines[1].capacity, Capacity::Fixed(5));
        match &engines[1].endpoint {
            Endpoint::Tcp {
                address,
                tls: Some(tls),
            } => {
                assert_eq!(address, "10.0.0.2:2376");
                assert_eq!(tls.ca, Path::new("/etc/ps/tls/ca.pem"));
                assert_eq!(tls.key, Path::new("/keys/key.pem"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(config.profile("p").unwrap().engines, ["alpha"]);
        assert_eq!(config.docker.options().engines, *engines);
        // Without [engines], the implicit engine, unbounded.
        let none = Config::parse(Path::new("c.toml"), "").unwrap();
        assert_eq!(none.docker.options().engines.len(), 1);
        assert_eq!(
            none.docker.options().engines[0].capacity,
            Capacity::Unbounded
        );
    }

    #[test]
    fn bad_engines_are_named_with_their_line_and_field() {
        let profile = format!(
            "[profiles.p]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n"
        );
        let cases = [
            (
                "[engines.e]\nurl = \"/var/run/docker.sock\"\n".to_string(),
                "c.toml:1: engine `e`: url: `/var/run/docker.sock` is not an engine URL",
            ),
            (
                "[engines.e]\nurl = \"unix:///x.sock\"\ncapacty = 3\n".to_string(),
                "c.toml:1: engine `e`: unknown field `capacty`",
            ),
            (
                "[engines.e]\nurl = \"unix:///x.sock\"\ncapacity = 0\n".to_string(),
                "c.toml:1: engine `e`: capacity = 0",
            ),
            (
                "\n[engines.e]\nurl = \"unix:///x.sock\"\n".to_string()
                    + &profile
                    + "engines = [\"f\"]\n",
                "c.toml:4: profile `p`: `engines` names `f`, which is not configured (configured: e)",
            ),
            (
                profile.clone() + "engines = [\"f\"]\n",
                "c.toml:1: profile `p`: `engines` names `f`, but the config has no [engines] table",
            ),
            (
                profile.clone() + "engines = []\n",
                "c.toml:1: profile `p`: `engines = []` names no engine",
            ),
        ];
        for (text, expected) in cases {
            let message = Config::parse(Path::new("c.toml"), &text)
                .unwrap_err()
                .to_string();
            assert!(
                message.starts_with(expected),
                "{message}\nwanted: {expected}"
            );
        }
    }

    #[test]
    fn the_oci_section_is_read_and_a_bad_bound_named() {
        let text = "[store]\npath = \"x.db\"\n[oci]\nimage_cache = \"cache\"\nruntime_timeout = \"30s\"\nhttp_registries = [\"10.0.0.2:5000\"]\n";
        let config = Config::parse(Path::new("conf/c.toml"), text).unwrap();
        assert_eq!(config.oci.image_cache, Path::new("conf/cache"));
        assert_eq!(config.oci.runtime_timeout, Duration::from_secs(30));
        assert_eq!(
            config.oci.http_registries,
            vec!["10.0.0.2:5000".to_string()]
        );
        let bad = text.replace("\"30s\"", "\"0s\"");
        let message = Config::parse(Path::new("c.toml"), &bad)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("c.toml:5: oci.runtime_timeout = \"0s\""),
            "{message}"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_config_folder() {
        let text = format!(
            "[store]\npath = \"evidence.db\"\n[profiles.p]\nbackend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"python3\"]\n[comparators.mine]\npath = \"cmp/mine.wasm\"\nsha256 = \"{}\"\n",
            "a".repeat(64)
        );
        let config = Config::parse(Path::new("/etc/ps/progscore.toml"), &text).unwrap();
        assert_eq!(config.store_path, Path::new("/etc/ps/evidence.db"));
        assert_eq!(
            config.comparators[0].path,
            Path::new("/etc/ps/cmp/mine.wasm")
        );
        assert_eq!(config.profile("p").unwrap().limits.timeout_ms, 10_000);
    }
}
