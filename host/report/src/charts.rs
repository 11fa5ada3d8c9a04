//! The overview's charts, as inline SVG (no script, no request, no font
//! files): a verdict bar per profile, and histograms.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::Counts;

const PASS: &str = "#2e7d32";
const FAIL: &str = "#c62828";
const UNDETERMINED: &str = "#9e9e9e";
const BAR: &str = "#1565c0";

/// Escapes text for SVG (XML) content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One stacked bar per profile: true, false, undetermined.
pub(crate) fn verdict_bars(groups: &BTreeMap<String, Counts>) -> String {
    let label_width = 160.0;
    let bar_width = 440.0;
    let row = 26.0;
    let height = row * groups.len() as f64 + 8.0;
    let mut svg = format!(
        r#"<svg class="chart" role="img" aria-label="verdicts per profile" viewBox="0 0 {w} {height}" width="{w}" height="{height}" xmlns="http://www.w3.org/2000/svg">"#,
        w = label_width + bar_width + 60.0
    );
    for (index, (profile, counts)) in groups.iter().enumerate() {
        let y = 4.0 + index as f64 * row;
        let _ = write!(
            svg,
            r##"<text x="{x}" y="{ty}" text-anchor="end" font-size="12" fill="#333">{name}</text>"##,
            x = label_width - 8.0,
            ty = y + 15.0,
            name = escape(profile)
        );
        let mut x = label_width;
        for (count, colour, what) in [
            (counts.passed, PASS, "true"),
            (counts.failed, FAIL, "false"),
            (counts.undetermined, UNDETERMINED, "undetermined"),
        ] {
            if count == 0 || counts.total == 0 {
                continue;
            }
            let width = bar_width * count as f64 / counts.total as f64;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{y}" width="{width:.1}" height="20" fill="{colour}"><title>{what}: {count}</title></rect>"#
            );
            x += width;
        }
        let _ = write!(
            svg,
            r##"<text x="{x}" y="{ty}" font-size="12" fill="#333">{rate}</text>"##,
            x = label_width + bar_width + 6.0,
            ty = y + 15.0,
            rate = escape(&counts.pass_rate())
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A histogram of `values` in 20 equal bins from 0 to the largest value,
/// its axis labelled with `format` (e.g. milliseconds, MiB).
pub(crate) fn histogram(title: &str, values: &[u64], format: impl Fn(u64) -> String) -> String {
    const BINS: usize = 20;
    let width = 600.0;
    let height = 160.0;
    let plot_height = 120.0;
    let max = values.iter().copied().max().unwrap_or(0).max(1);
    let mut bins = [0usize; BINS];
    for value in values {
        let bin = ((*value as f64 / max as f64) * BINS as f64) as usize;
        bins[bin.min(BINS - 1)] += 1;
    }
    let tallest = bins.iter().copied().max().unwrap_or(0).max(1);
    let bin_width = width / BINS as f64;
    let mut svg = format!(
        r#"<svg class="chart" role="img" aria-label="{title}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">"#,
        title = escape(title)
    );
    for (index, count) in bins.iter().enumerate() {
        if *count == 0 {
            continue;
        }
        let bar = plot_height * *count as f64 / tallest as f64;
        let low = max as f64 * index as f64 / BINS as f64;
        let high = max as f64 * (index + 1) as f64 / BINS as f64;
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{bar:.1}" fill="{BAR}"><title>{from} to {to}: {count}</title></rect>"#,
            x = index as f64 * bin_width + 1.0,
            y = plot_height - bar + 4.0,
            w = bin_width - 2.0,
            from = escape(&format(low as u64)),
            to = escape(&format(high as u64)),
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="0" y1="{base}" x2="{width}" y2="{base}" stroke="#666"/><text x="0" y="{label}" font-size="11" fill="#333">0</text><text x="{width}" y="{label}" font-size="11" text-anchor="end" fill="#333">{top}</text><text x="{mid}" y="{label}" font-size="11" text-anchor="middle" fill="#333">{count} items, tallest bar {tallest}</text></svg>"##,
        base = plot_height + 4.0,
        label = plot_height + 22.0,
        top = escape(&format(max)),
        mid = width / 2.0,
        count = values.len(),
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_every_value_is_binned() {
        let mut groups = BTreeMap::new();
        let mut counts = Counts::default();
        counts.add("true");
        counts.add("false");
        groups.insert("<b>evil</b>".to_string(), counts);
        let svg = verdict_bars(&groups);
        assert!(svg.contains("&lt;b&gt;evil&lt;/b&gt;"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        let svg = histogram("durations", &[0, 5, 10, 10], |v| format!("{v} ms"));
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
        assert!(svg.contains("4 items"), "{svg}");
    }
}
