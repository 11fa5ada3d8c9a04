//! The page: an askama template (every value escaped unless it is this
//! crate's own SVG, script or style), the items as inert JSON data, and a
//! Content-Security-Policy that admits only the page's own script and style.

use askama::Template;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::charts;
use crate::error::ReportError;
use crate::model::{Counts, Item, Report};

/// The page's behaviour: filtering, sorting, paging, opening an item. It
/// puts data on screen with `textContent` only.
const SCRIPT: &str = include_str!("../assets/report.js");
const STYLE: &str = include_str!("../assets/report.css");

#[derive(Template)]
#[template(path = "report.html")]
struct Page<'a> {
    report: &'a Report,
    csp: String,
    style: &'static str,
    script: &'static str,
    data: String,
    counts: Counts,
    profiles: Vec<(String, Counts)>,
    reasons: Vec<(String, usize, String)>,
    changes: Vec<(&'a str, &'static str, &'static str)>,
    change_summary: Vec<(String, usize)>,
    verdict_chart: String,
    duration_chart: String,
    cpu_chart: Option<String>,
    memory_chart: Option<String>,
    wall: String,
    throughput: String,
    program_cap: String,
    excerpt_cap: String,
    version: &'static str,
}

#[derive(serde::Serialize)]
struct Data<'a> {
    items: &'a [Item],
    provenances: &'a [serde_json::Value],
    has_baseline: bool,
    excerpt_bytes: usize,
    program_bytes: usize,
}

/// The report as one self-contained HTML page.
pub fn render(report: &Report) -> Result<String, ReportError> {
    let counts = report.counts();
    let durations: Vec<u64> = report.items.iter().map(|i| i.duration_ms).collect();
    let cpu: Vec<u64> = report.items.iter().filter_map(|i| i.cpu_ms).collect();
    let memory: Vec<u64> = report
        .items
        .iter()
        .filter_map(|i| i.peak_memory_bytes)
        .collect();
    let changes = report.changes();
    let mut change_summary: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, before, after) in &changes {
        *change_summary
            .entry(format!("{before} \u{2192} {after}"))
            .or_default() += 1;
    }
    let data = Data {
        items: &report.items,
        provenances: &report.provenances,
        has_baseline: report.baseline_source.is_some()
            || report.items.iter().any(|i| i.before.is_some()),
        excerpt_bytes: report.limits.excerpt_bytes,
        program_bytes: report.limits.program_bytes,
    };
    let page = Page {
        report,
        csp: format!(
            "default-src 'none'; script-src '{}'; style-src '{}'; img-src data:; base-uri 'none'; form-action 'none'",
            csp_hash(SCRIPT),
            csp_hash(STYLE)
        ),
        style: STYLE,
        script: SCRIPT,
        data: inert_json(&serde_json::to_string(&data)?),
        profiles: report.by_profile().into_iter().collect(),
        reasons: report.undetermined_reasons(),
        change_summary: change_summary.into_iter().collect(),
        changes,
        verdict_chart: charts::verdict_bars(&report.by_profile()),
        duration_chart: charts::histogram("wall time per item", &durations, milliseconds),
        cpu_chart: (!cpu.is_empty())
            .then(|| charts::histogram("CPU time per item", &cpu, milliseconds)),
        memory_chart: (!memory.is_empty())
            .then(|| charts::histogram("peak memory per item", &memory, mebibytes)),
        wall: report
            .span_seconds
            .map_or("-".into(), |s| format!("{s:.1} s")),
        throughput: report
            .span_seconds
            .filter(|s| *s > 0.0)
            .map_or("-".into(), |s| {
                format!("{:.1} items/s", report.items.len() as f64 / s)
            }),
        program_cap: kib(report.limits.program_bytes),
        excerpt_cap: kib(report.limits.excerpt_bytes),
        counts,
        version: env!("CARGO_PKG_VERSION"),
    };
    Ok(page.render()?)
}

/// `'sha256-…'` of an inline script or style, as CSP names it.
fn csp_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// JSON that can sit inside a `<script type="application/json">` element:
/// `<`, `>` and `&` only ever occur inside JSON strings, where their
/// `\u` escapes mean the same, so no `</script>` a program printed can end
/// the element.
fn inert_json(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn milliseconds(ms: u64) -> String {
    if ms >= 10_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn kib(bytes: usize) -> String {
    format!("{} KiB", bytes / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closing_script_tag_in_the_data_cannot_end_the_element() {
        let json = serde_json::to_string(
            &serde_json::json!({"out": "</script><script>alert(1)</script>&"}),
        )
        .unwrap();
        let inert = inert_json(&json);
        assert!(!inert.contains('<') && !inert.contains('>') && !inert.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&inert).unwrap();
        assert_eq!(back["out"], "</script><script>alert(1)</script>&");
    }
}
