//! `progscore report`, opened in real headless Chromium (Debian's
//! `chromium`, installed by scripts/setup.sh): the page as a browser built
//! it (`--dump-dom`, after its script ran), its console, and a screenshot.
//! The page keeps its view in the URL's fragment, so a fragment is how a
//! test filters the items or opens one.

use std::collections::BTreeSet;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use progscore_e2e::{Dir, result_lines, stderr, verdict};
use scraper::{Html, Selector};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// What Chromium made of the page at `fragment`: the DOM after the page's
/// script ran, and every message the page logged to its console
/// (script errors and Content-Security-Policy violations included).
fn open(page: &Path, fragment: &str) -> (Html, Vec<String>) {
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=2000",
            "--dump-dom",
        ])
        .arg(format!("file://{}#{fragment}", page.display()))
        .output()
        .expect("chromium runs (scripts/setup.sh installs it)");
    assert!(output.status.success(), "{}", stderr(&output));
    let console = stderr(&output)
        .lines()
        .filter(|line| line.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (
        Html::parse_document(&String::from_utf8_lossy(&output.stdout)),
        console,
    )
}

fn texts(dom: &Html, selector: &str) -> Vec<String> {
    let selector = Selector::parse(selector).expect("a selector");
    dom.select(&selector)
        .map(|e| e.text().collect::<String>())
        .collect()
}

fn attributes(dom: &Html, selector: &str, name: &str) -> Vec<String> {
    let selector = Selector::parse(selector).expect("a selector");
    dom.select(&selector)
        .filter_map(|e| e.value().attr(name).map(str::to_string))
        .collect()
}

/// How many distinct colours a PNG holds (a blank page has one or two).
fn colours(png: &Path) -> usize {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png).expect("the screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buffer = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buffer).expect("a frame");
    let channels = info.color_type.samples();
    buffer[..info.buffer_size()]
        .chunks(channels)
        .map(|pixel| pixel.to_vec())
        .collect::<BTreeSet<_>>()
        .len()
}

#[test]
fn the_example_batch_report_opens_filters_and_shows_a_diff_in_chromium() {
    let dir = Dir::new();
    let batch = examples().join("batch.jsonl");
    let output = dir.run(&[
        "score",
        batch.to_str().unwrap(),
        "--out",
        "results.jsonl",
        "--report",
        "scored.html",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    let count = |word: &str| results.iter().filter(|l| verdict(l) == word).count();
    let false_ids: BTreeSet<String> = results
        .iter()
        .filter(|l| verdict(l) == "false")
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!false_ids.is_empty());

    // The page `score --report` wrote, and the one `report` writes later.
    let output = dir.run(&["report", "results.jsonl", "-o", "report.html"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    for page in ["scored.html", "report.html"] {
        let page = dir.path().join(page);
        let (dom, console) = open(&page, "");
        assert_eq!(
            console,
            Vec::<String>::new(),
            "console of {}",
            page.display()
        );
        for (id, expected) in [
            ("count-total", results.len()),
            ("count-true", count("true")),
            ("count-false", count("false")),
            ("count-undetermined", count("undetermined")),
        ] {
            assert_eq!(
                texts(&dom, &format!("#{id}")),
                vec![expected.to_string()],
                "{id} in {}",
                page.display()
            );
        }
        assert_eq!(
            attributes(&dom, "tr.item-row", "data-id").len(),
            results.len()
        );
    }
    let page = dir.path().join("report.html");

    // Filtering by `false` shows exactly the false items.
    let (dom, console) = open(&page, "verdict=false");
    assert_eq!(console, Vec::<String>::new());
    let shown: BTreeSet<String> = attributes(&dom, "tr.item-row", "data-id")
        .into_iter()
        .collect();
    assert_eq!(shown, false_ids);

    // Opening an item whose `equals` failed shows its diff and its evidence.
    let (dom, console) = open(&page, "item=square-wrong-doubles");
    assert_eq!(console, Vec::<String>::new());
    assert_eq!(
        texts(&dom, "#detail .diff-line.diff-del"),
        vec!["- 16".to_string()]
    );
    assert_eq!(
        texts(&dom, "#detail .diff-line.diff-add"),
        vec!["+ 8".to_string()]
    );
    let detail = texts(&dom, "#detail").concat();
    for wanted in [
        "Program (as it ran)",
        "provenance",
        "image_id",
        "kept 2 of 2 bytes",
    ] {
        assert!(detail.contains(wanted), "{wanted} missing in: {detail}");
    }

    // A screenshot of the page, which is not blank.
    let shot = dir.path().join("report.png");
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,1400",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let colours = colours(&shot);
    assert!(colours > 20, "a blank screenshot ({colours} colours)");
}

#[test]
fn hostile_program_output_stays_inert_text_in_the_report() {
    // Anything that leaves the page would reach this listener.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let payload = format!(
        "</textarea></script><script>document.title='pwned';console.log('pwned')</script>\
         <img src=\"http://127.0.0.1:{port}/img\" onerror=\"console.log('pwned')\">\
         <iframe src=\"http://127.0.0.1:{port}/frame\"></iframe>\
         <style>@import url(http://127.0.0.1:{port}/css);</style>"
    );
    let program = format!("print({payload:?})\n");
    let item = serde_json::json!({
        "id": format!("hostile <b>{port}</b>"),
        "program": program,
        "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
            {"invocation": {"args": ["</script>"], "stdin": "<script>alert(1)</script>"},
             "expected": {"stdout": {"equals": "<script>alert(2)</script>"}}}]}}]},
    });
    let dir = Dir::new();
    dir.write("batch.jsonl", format!("{item}\n"));
    let output = dir.run(&["score", "batch.jsonl", "--out", "results.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = dir.run(&["report", "results.jsonl", "-o", "report.html"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let page = dir.path().join("report.html");

    let id = format!("hostile <b>{port}</b>");
    let fragment = format!("item={}", urlencode(&id));
    let (dom, console) = open(&page, &fragment);
    // No script ran (it would have logged or retitled), and none tried: a
    // blocked attempt would show as a CSP violation in the console.
    assert_eq!(console, Vec::<String>::new());
    assert_eq!(
        texts(&dom, "head > title"),
        vec!["progscore report: results.jsonl".to_string()]
    );
    // The payload is on the page as text, whole, in the item's stdout.
    let stdout = texts(&dom, "#detail pre.stream-stdout");
    assert_eq!(stdout, vec![format!("{payload}\n")]);
    assert!(texts(&dom, "#detail h2").concat().contains(&id));
    // And it made no element: one script of the page's own, no image, no frame.
    assert_eq!(attributes(&dom, "img", "src"), Vec::<String>::new());
    assert_eq!(attributes(&dom, "iframe", "src"), Vec::<String>::new());
    assert_eq!(texts(&dom, "script:not([type])").len(), 1);
    // No request left the page.
    std::thread::sleep(Duration::from_millis(200));
    match listener.accept() {
        Ok((mut stream, _)) => {
            let mut request = String::new();
            let _ = stream.read_to_string(&mut request);
            panic!("the page made a request: {request}");
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A C program that does not compile: its item shows the compile as failed,
/// with the compiler's command and its error, and every case `compile_error`.
#[test]
fn a_compile_error_shows_the_compiler_and_its_output() {
    let dir = Dir::new();
    let item = serde_json::json!({
        "id": "broken-c",
        "program": "int main(void) { return missing(; }\n",
        "expectation": {"conditions": [{"program_behaves": {"profile": "c", "cases": [
            {"invocation": {"args": ["3"]}, "expected": {"stdout": {"equals": "9"}}}]}}]},
    });
    dir.write("batch.jsonl", format!("{item}\n"));
    let output = dir.run(&["score", "batch.jsonl", "--report", "report.html"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (dom, console) = open(&dir.path().join("report.html"), "item=broken-c");
    assert_eq!(console, Vec::<String>::new());
    assert_eq!(
        texts(&dom, "#detail .compile h3"),
        vec!["Compile: failed".to_string()]
    );
    let compile = texts(&dom, "#detail .compile").concat();
    for wanted in ["\"gcc\"", "/sandbox/main.c", "error", "exit code 1"] {
        assert!(compile.contains(wanted), "{wanted} missing in: {compile}");
    }
    let detail = texts(&dom, "#detail").concat();
    assert!(detail.contains("compile_error"), "{detail}");
    assert!(detail.contains("did not compile"), "{detail}");
}

/// An interactive case shows its conversation with the interactor, write
/// by write, and what the interactor said.
#[test]
fn the_report_shows_an_interactive_case_conversation() {
    let dir = Dir::new();
    let guess = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/interactive/guess");
    let read = |path: &str| std::fs::read_to_string(guess.join(path)).expect("the example");
    let item = serde_json::json!({
        "id": "guess",
        "program": read("submissions/right.py"),
        "expectation": {"conditions": [{"program_behaves": {"profile": "python",
            "interactor": {"profile": "python", "source": read("interactor.py")},
            "cases": [{"invocation": {"stdin": read("tests/01.in")},
                       "expected": {"answer": read("tests/01.ans")}}]}}]},
    });
    dir.write("batch.jsonl", format!("{item}\n"));
    let output = dir.run(&["score", "batch.jsonl", "--report", "report.html"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (dom, console) = open(&dir.path().join("report.html"), "item=guess");
    assert_eq!(console, Vec::<String>::new());
    let conversation = texts(&dom, "#detail pre.conversation").concat();
    // The interactor opened with `n q`; the program asked and ended with `! 4`.
    assert!(
        conversation.contains("interactor \u{2192} 10 5"),
        "{conversation}"
    );
    assert!(
        conversation.contains("program    \u{2192} ? "),
        "{conversation}"
    );
    assert!(
        conversation.contains("program    \u{2192} ! 4"),
        "{conversation}"
    );
    let detail = texts(&dom, "#detail").concat();
    assert!(detail.contains("writes shown"), "{detail}");
}
