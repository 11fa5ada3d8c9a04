//! MultiPL-E's HumanEval, every language progscore has an image for: each
//! item's model-written solution (the code in its `gpt_solution` fence) joined
//! with MultiPL-E's tests, run once under the language's profile. Prints, per
//! language, items/s and how the items ended: passed (exit 0), failed (another
//! exit), compile error, proven timeout, memory limit, and undetermined (a
//! sandbox error or an unproven timeout: there must be none). Every verdict
//! rests on an exit, a compile result or a proven timeout. The baseline beside
//! it is one hello world per language through the same backends, the same way.
//!
//! `cargo bench -p progscore-runtime --bench multipl_e` after
//! `scripts/setup.sh --languages all`. PROGSCORE_MULTIPL_E: the dataset folder
//! (default ../shared/datasets/multipl-e beside the repository);
//! PROGSCORE_BENCH_LANGUAGES: a comma list of MultiPL-E names (default: all);
//! PROGSCORE_BENCH_ITEMS: at most this many items per language (default: all);
//! PROGSCORE_BENCH_JOBS: programs at a time (default 4);
//! PROGSCORE_BENCH_SHOW_COMPILE_ERRORS=1: each compile error's first line of
//! compiler output (whether the model's code or the joining failed to build).

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{Invocation, Outcome, ProgramRun};

/// MultiPL-E's language name -> the profile `scripts/setup.sh` writes for it.
/// Julia and Swift have no Debian toolchain in bookworm.
const LANGUAGES: [(&str, &str); 16] = [
    ("cpp", "cpp"),
    ("cs", "csharp"),
    ("d", "d"),
    ("go", "go-test"),
    ("java", "java-problem"),
    ("js", "javascript"),
    ("lua", "lua"),
    ("php", "php"),
    ("pl", "perl"),
    ("r", "r"),
    ("rb", "ruby"),
    ("rkt", "racket"),
    ("rs", "rust"),
    ("scala", "scala"),
    ("sh", "bash"),
    ("ts", "typescript"),
];

/// How one item ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    Passed,
    Failed,
    CompileError,
    TimedOut,
    MemoryLimit,
    Undetermined,
}

fn main() {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let root = progscore_test_kit::workspace_root();
    let dataset = env("PROGSCORE_MULTIPL_E")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/datasets/multipl-e"));
    let jobs: usize = env("PROGSCORE_BENCH_JOBS").map_or(4, |v| v.parse().expect("jobs"));
    let limit: usize =
        env("PROGSCORE_BENCH_ITEMS").map_or(usize::MAX, |v| v.parse().expect("items"));
    let only: Option<Vec<String>> =
        env("PROGSCORE_BENCH_LANGUAGES").map(|v| v.split(',').map(str::to_string).collect());
    let config = Config::load(&progscore_test_kit::generated_config_path())
        .expect("progscore.toml: run scripts/setup.sh");
    let present: Vec<_> = LANGUAGES
        .into_iter()
        .filter(|(language, _)| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|l| l == language))
        })
        .filter(|(language, profile)| {
            let there = config.profile(profile).is_some();
            if !there {
                println!("{language}: no profile {profile} (scripts/setup.sh --languages all)");
            }
            there
        })
        .collect();
    let profiles = present
        .iter()
        .map(|(_, profile)| config.profile(profile).expect("profile").clone())
        .collect();
    let backends = Backends::new(profiles).expect("backends");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    println!(
        "MultiPL-E HumanEval from {}, {jobs} programs at a time",
        dataset.display()
    );

    let mut rows = Vec::new();
    for (language, profile) in &present {
        let items = programs(&dataset, language, limit);
        let baseline = runtime.block_on(baseline(&backends, &root, language, profile, jobs));
        let started = Instant::now();
        let endings = runtime.block_on(run_all(&backends, profile, &items, jobs));
        let wall = started.elapsed();
        let mut counts: BTreeMap<Ending, usize> = BTreeMap::new();
        for (_, ending) in &endings {
            *counts.entry(*ending).or_default() += 1;
        }
        for (name, ending) in &endings {
            if *ending == Ending::Undetermined {
                println!("  {language} {name}: undetermined");
            }
        }
        println!(
            "{language:<6} {profile:<13} {:>4} items in {:>7.1}s: {:>5.2} items/s {counts:?}",
            items.len(),
            wall.as_secs_f64(),
            items.len() as f64 / wall.as_secs_f64()
        );
        rows.push((*language, *profile, items.len(), wall, counts, baseline));
    }
    println!();
    println!(
        "  {:<6} {:<13} {:>5} {:>9} {:>8} {:>7} {:>7} {:>8} {:>8} {:>7} {:>7} {:>11}",
        "lang",
        "profile",
        "items",
        "wall (s)",
        "items/s",
        "passed",
        "failed",
        "compile",
        "timeout",
        "memory",
        "undet.",
        "baseline/s"
    );
    let mut undetermined = 0;
    for (language, profile, count, wall, counts, baseline) in rows {
        let n = |e: Ending| counts.get(&e).copied().unwrap_or(0);
        undetermined += n(Ending::Undetermined);
        println!(
            "  {:<6} {:<13} {:>5} {:>9.1} {:>8.2} {:>7} {:>7} {:>8} {:>8} {:>7} {:>7} {:>11.2}",
            language,
            profile,
            count,
            wall.as_secs_f64(),
            count as f64 / wall.as_secs_f64(),
            n(Ending::Passed),
            n(Ending::Failed),
            n(Ending::CompileError),
            n(Ending::TimedOut),
            n(Ending::MemoryLimit),
            n(Ending::Undetermined),
            BASELINE_PROGRAMS as f64 / baseline.as_secs_f64(),
        );
    }
    assert_eq!(
        undetermined, 0,
        "items were left undetermined (listed above)"
    );
}

/// Each item's name and program: the solution's fenced code joined with
/// MultiPL-E's tests as its completions are (see `join`).
fn programs(dataset: &Path, language: &str, limit: usize) -> Vec<(String, String)> {
    let path = dataset.join(format!("humaneval-{language}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .take(limit)
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let field = |name: &str| row[name].as_str().unwrap_or_default().to_string();
            let solution = fenced_code(&field("gpt_solution"));
            (
                field("name"),
                join(language, &field("prompt"), &solution, &field("tests")),
            )
        })
        .collect()
}

/// The code inside the first markdown fence (the whole text when there is none).
fn fenced_code(answer: &str) -> String {
    let Some(start) = answer.find("```") else {
        return answer.to_string();
    };
    let after_fence = &answer[start + 3..];
    let body_start = after_fence.find('\n').map_or(after_fence.len(), |i| i + 1);
    let body = &after_fence[body_start..];
    body.find("```")
        .map_or(body, |end| &body[..end])
        .to_string()
}

/// A whole solution followed by MultiPL-E's tests, joined as MultiPL-E's
/// completions are. A model's whole program often brings its own entry point
/// and leaves out the prompt's imports: its `main` goes (the tests bring
/// theirs) and the prompt's import lines come first. The tests of the brace
/// languages start by closing the prompt's function (`}`): a whole solution
/// closed it already, so that brace goes; where the function sits in a class
/// (C#, Java, Scala) the tests close the class too, so the solution's last
/// brace goes. Go's tests are a `_test` package: the solution's package line
/// becomes the prompt's.
fn join(language: &str, prompt: &str, solution: &str, tests: &str) -> String {
    let mut solution = without_main(language, solution.trim_end());
    let mut tests = tests.to_string();
    if tests.trim_start().starts_with('}') {
        let brace = tests.find('}').expect("a brace");
        tests.replace_range(..=brace, "");
        if matches!(language, "cs" | "java" | "scala")
            && let Some(last) = solution.rfind('}')
        {
            solution.truncate(last);
        }
    }
    if language == "go" {
        return go_program(prompt, &solution, &tests);
    } else {
        let imports: String = prompt
            .lines()
            .filter(|l| {
                ["using ", "import ", "#include"]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        solution = format!("{imports}{solution}");
    }
    format!("{solution}\n{tests}")
}

/// A Go test file of the solution and the tests, as `go test` compiles it:
/// the prompt's package; the solution's own tests go (MultiPL-E's may share
/// their names); and one import block of every package the file uses,
/// from the solution's imports, the prompt's, and `testing` and `fmt`
/// (which the tests use), for Go refuses both a missing and an unused one.
fn go_program(prompt: &str, solution: &str, tests: &str) -> String {
    let package = prompt.lines().next().unwrap_or_default();
    let (solution, mut specs) = go_imports(&without_functions(solution, &["func Test"]));
    let (_, prompt_specs) = go_imports(prompt);
    specs.extend(prompt_specs);
    specs.extend(["\"testing\"".to_string(), "\"fmt\"".to_string()]);
    let body: String = format!("{solution}\n{tests}")
        .lines()
        .filter(|l| !l.trim_start().starts_with("package "))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut used: Vec<String> = Vec::new();
    for spec in specs {
        // `alias "path/name"` or `"path/name"`: the name the code calls.
        let path = spec.trim_matches(|c: char| c != '"').trim_matches('"');
        let name = match spec.split_whitespace().next() {
            Some(alias) if !alias.starts_with('"') => alias.to_string(),
            _ => path.rsplit('/').next().unwrap_or(path).to_string(),
        };
        if body.contains(&format!("{name}.")) && !used.contains(&spec) {
            used.push(spec);
        }
    }
    let imports: String = used.iter().map(|s| format!("    {s}\n")).collect();
    format!("{package}\n\nimport (\n{imports})\n\n{body}")
}

/// `text` without its import declarations, and their specs (`"fmt"`,
/// `str "strings"`).
fn go_imports(text: &str) -> (String, Vec<String>) {
    let mut specs = Vec::new();
    let mut kept = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if in_block {
            if trimmed.starts_with(')') {
                in_block = false;
            } else if !trimmed.is_empty() && !trimmed.starts_with("//") {
                specs.push(trimmed.to_string());
            }
        } else if trimmed == "import (" || trimmed == "import(" {
            in_block = true;
        } else if let Some(spec) = trimmed.strip_prefix("import ") {
            specs.push(spec.trim().to_string());
        } else {
            kept.push(line);
        }
    }
    (kept.join("\n"), specs)
}

/// The solution without its own entry point (the lines from its `main` to
/// the brace that closes it), for the languages whose tests bring one.
fn without_main(language: &str, solution: &str) -> String {
    let starts: &[&str] = match language {
        "cpp" => &["int main("],
        "cs" => &["static void Main("],
        "java" => &["static void main("],
        "scala" => &["def main("],
        "rs" => &["fn main("],
        "d" => &["void main("],
        "go" => &["func main("],
        _ => return solution.to_string(),
    };
    without_functions(solution, starts)
}

/// `solution` without every function whose first line holds one of
/// `starts` (spaces ignored): the lines from it to its closing brace.
fn without_functions(solution: &str, starts: &[&str]) -> String {
    let mut lines: Vec<&str> = solution.lines().collect();
    let starts: Vec<String> = starts.iter().map(|s| s.replace(' ', "")).collect();
    let mut from = 0;
    while let Some(start) = lines
        .iter()
        .skip(from)
        .position(|l| {
            let bare = l.replace(' ', "");
            starts.iter().any(|s| bare.contains(s.as_str()))
        })
        .map(|i| i + from)
    {
        let mut depth = 0i32;
        let mut opened = false;
        let mut end = lines.len() - 1;
        'lines: for (i, line) in lines.iter().enumerate().skip(start) {
            for c in line.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
                if opened && depth == 0 {
                    end = i;
                    break 'lines;
                }
            }
        }
        lines.drain(start..=end);
        from = start;
    }
    lines.join("\n")
}

/// How many copies of the trivial program the baseline runs.
const BASELINE_PROGRAMS: usize = 4;

/// The baseline: a trivial correct program of the language
/// (examples/languages/multipl-e/<language>/add-correct), BASELINE_PROGRAMS
/// copies that differ by a comment (each compiled anew), run the same way.
async fn baseline(
    backends: &Backends,
    root: &Path,
    language: &str,
    profile: &str,
    jobs: usize,
) -> Duration {
    let path = root.join(format!(
        "examples/languages/multipl-e/{language}/add-correct.{language}"
    ));
    let program =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let comment = match language {
        "lua" => "--",
        "pl" | "r" | "rb" | "sh" => "#",
        "rkt" => ";",
        _ => "//",
    };
    let items: Vec<(String, String)> = (0..BASELINE_PROGRAMS)
        .map(|i| {
            let copy = format!("{program}\n{comment} baseline {i} {}\n", std::process::id());
            (format!("baseline-{i}"), copy)
        })
        .collect();
    let started = Instant::now();
    let endings = run_all(backends, profile, &items, jobs).await;
    let elapsed = started.elapsed();
    for (name, ending) in endings {
        assert_eq!(
            ending,
            Ending::Passed,
            "{language} {name}: the baseline program failed"
        );
    }
    elapsed
}

async fn run_all(
    backends: &Backends,
    profile: &str,
    items: &[(String, String)],
    jobs: usize,
) -> Vec<(String, Ending)> {
    let invocations = [Invocation::with_args(Vec::<String>::new())];
    let invocations = &invocations;
    futures_util::stream::iter(items)
        .map(|(name, program)| async move {
            let run = backends
                .execute(program.as_bytes(), profile, invocations)
                .await;
            let ending = match &run {
                Ok(run) => ending(run),
                Err(_) => Ending::Undetermined,
            };
            if ending == Ending::CompileError
                && std::env::var_os("PROGSCORE_BENCH_SHOW_COMPILE_ERRORS").is_some()
                && let Ok(run) = &run
            {
                println!("  {profile} {name}: compile error: {}", first_error(run));
            }
            (name.clone(), ending)
        })
        .buffer_unordered(jobs)
        .collect()
        .await
}

/// The compiler's first line that says "error" (else its first line).
fn first_error(run: &ProgramRun) -> String {
    let Some(compile) = &run.compile else {
        return String::new();
    };
    let event = &compile.event;
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&event.stderr.data.0),
        String::from_utf8_lossy(&event.stdout.data.0)
    );
    output
        .lines()
        .find(|line| line.to_ascii_lowercase().contains("error"))
        .or_else(|| output.lines().next())
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

fn ending(run: &ProgramRun) -> Ending {
    match run.events.first().map(|e| &e.outcome) {
        Some(Outcome::Exited { exit_code: 0 }) => Ending::Passed,
        Some(Outcome::Exited { .. }) => Ending::Failed,
        Some(Outcome::CompileError { .. }) => Ending::CompileError,
        Some(Outcome::TimedOut {
            unconfirmed: None, ..
        }) => Ending::TimedOut,
        Some(Outcome::MemoryLimit) => Ending::MemoryLimit,
        _ => Ending::Undetermined,
    }
}
