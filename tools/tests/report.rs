//! `spindle_tools::report` (the `bench-report` binary): reading criterion's
//! saved results, the suite section, the markers and the chart, on small
//! fixtures written into a temporary directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use spindle_tools::report::{
    self, BEGIN_MARKER, END_MARKER, Machine, MarkerError, Measurement, Meta, Options, ReportError,
};

/// A fresh directory under cargo's temporary directory for integration tests.
fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes criterion's `new/benchmark.json` and `new/estimates.json` for one
/// benchmark, as criterion 0.8 lays them out.
fn write_result(
    criterion: &Path,
    group: &str,
    function: &str,
    size: &str,
    median_ns: f64,
    elements: Option<u64>,
) {
    let dir = criterion.join(group).join(function).join(size).join("new");
    fs::create_dir_all(&dir).unwrap();
    let throughput = match elements {
        Some(n) => format!("{{\"Elements\":{n}}}"),
        None => "null".to_string(),
    };
    let full = format!("{group}/{function}/{size}");
    fs::write(
        dir.join("benchmark.json"),
        format!(
            "{{\"group_id\":\"{group}\",\"function_id\":\"{function}\",\"value_str\":\"{size}\",\
             \"throughput\":{throughput},\"full_id\":\"{full}\",\"directory_name\":\"{full}\",\
             \"title\":\"{full}\"}}"
        ),
    )
    .unwrap();
    let estimate = |point: f64| {
        format!(
            "{{\"confidence_interval\":{{\"confidence_level\":0.95,\"lower_bound\":{},\
             \"upper_bound\":{}}},\"point_estimate\":{point},\"standard_error\":1.0}}",
            point * 0.99,
            point * 1.02
        )
    };
    fs::write(
        dir.join("estimates.json"),
        format!(
            "{{\"mean\":{},\"median\":{},\"median_abs_dev\":{},\"slope\":null,\"std_dev\":{}}}",
            estimate(median_ns * 1.01),
            estimate(median_ns),
            estimate(1.0),
            estimate(2.0)
        ),
    )
    .unwrap();
}

/// A criterion directory with two suite workloads (one without tokio
/// results) and an older, non-suite group.
fn fixture(name: &str) -> PathBuf {
    let criterion = temp_dir(name).join("criterion");
    // ShallowBind.pure: 10,000 steps; single 50 µs, batching 80 µs, tokio 200 µs.
    write_result(
        &criterion,
        "suite.ShallowBind.pure",
        "single",
        "10000",
        50_000.0,
        Some(10_000),
    );
    write_result(
        &criterion,
        "suite.ShallowBind.pure",
        "batching",
        "10000",
        80_000.0,
        Some(10_000),
    );
    write_result(
        &criterion,
        "suite.ShallowBind.pure",
        "tokio",
        "10000",
        200_000.0,
        Some(10_000),
    );
    // ShallowBind.delay: no tokio result.
    write_result(
        &criterion,
        "suite.ShallowBind.delay",
        "single",
        "10000",
        100_000.0,
        Some(10_000),
    );
    // WorkStealing.scheduling: wstp against tokio_mt.
    write_result(
        &criterion,
        "suite.WorkStealing.scheduling",
        "wstp",
        "1000",
        1_000_000.0,
        Some(1000),
    );
    write_result(
        &criterion,
        "suite.WorkStealing.scheduling",
        "tokio_mt",
        "1000",
        500_000.0,
        Some(1000),
    );
    // Not a suite group: skipped.
    write_result(
        &criterion,
        "ShallowBind.pure",
        "spindle",
        "10000",
        50_000.0,
        Some(10_000),
    );
    criterion
}

fn meta() -> Meta {
    Meta {
        machine: Machine {
            cpu: "Test CPU 9000".to_string(),
            cores: 4,
            os: "Test Linux 1.0, kernel 6.0".to_string(),
            rustc: "rustc 1.95.0 (test)".to_string(),
        },
        generated: "2026-01-02 03:04 UTC".to_string(),
        command: "cargo bench -p benches --bench suite".to_string(),
        criterion_dir: "target/criterion".to_string(),
        svg_link: "benches/suite.svg".to_string(),
    }
}

fn find<'a>(results: &'a [Measurement], group: &str, runtime: &str) -> &'a Measurement {
    results
        .iter()
        .find(|m| format!("{}.{}", m.workload, m.variant) == group && m.runtime == runtime)
        .unwrap_or_else(|| panic!("{group} {runtime} in {results:?}"))
}

/// The lines of the table under `### {workload}`.
fn table<'a>(section: &'a str, workload: &str) -> Vec<&'a str> {
    let heading = format!("### {workload}\n");
    let at = section
        .find(&heading)
        .unwrap_or_else(|| panic!("{heading} in {section}"));
    section[at + heading.len()..]
        .lines()
        .skip_while(|line| line.is_empty())
        .take_while(|line| line.starts_with('|'))
        .collect()
}

fn cells(line: &str) -> Vec<&str> {
    line.trim_matches('|').split('|').map(str::trim).collect()
}

#[test]
fn only_suite_groups_are_read_with_their_median_interval_and_elements() {
    let criterion = fixture("parse");
    let results = report::read_results(&criterion).unwrap();
    assert_eq!(results.len(), 6, "{results:?}");
    assert!(results.iter().all(|m| m.runtime != "spindle"));

    let single = find(&results, "ShallowBind.pure", "single");
    assert_eq!(single.workload, "ShallowBind");
    assert_eq!(single.variant, "pure");
    assert_eq!(single.size, "10000");
    assert_eq!(single.median_ns, 50_000.0);
    assert_eq!(single.median_lower_ns, 49_500.0);
    assert_eq!(single.median_upper_ns, 51_000.0);
    assert_eq!(single.elements, Some(10_000));
    assert_eq!(single.ops_per_sec(), 20_000.0);
    assert_eq!(single.elements_per_sec(), Some(200_000_000.0));
    assert!(single.written.is_some());

    let wstp = find(&results, "WorkStealing.scheduling", "wstp");
    assert_eq!((wstp.size.as_str(), wstp.elements), ("1000", Some(1000)));
}

#[test]
fn a_directory_without_suite_results_is_an_error_that_says_so() {
    let criterion = temp_dir("no-suite").join("criterion");
    write_result(
        &criterion,
        "ShallowBind.pure",
        "spindle",
        "10000",
        50_000.0,
        Some(10_000),
    );
    let error = report::read_results(&criterion).unwrap_err();
    assert!(
        matches!(
            error,
            ReportError::NoResults {
                other_groups: 1,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("no `suite.*` benchmark results"),
        "{error}"
    );

    let missing = report::read_results(&criterion.join("nowhere")).unwrap_err();
    assert!(matches!(missing, ReportError::Io { .. }), "{missing:?}");
}

#[test]
fn a_broken_estimates_file_is_an_error_naming_the_file() {
    let criterion = fixture("broken");
    let path = criterion.join("suite.ShallowBind.pure/single/10000/new/estimates.json");
    fs::write(&path, "{\"median\": {\"point_estimate\": \"fast\"}}").unwrap();
    let error = report::read_results(&criterion).unwrap_err();
    assert!(matches!(error, ReportError::Json { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("estimates.json"), "{message}");
    assert!(message.contains("median.point_estimate"), "{message}");

    fs::write(&path, "not json").unwrap();
    let error = report::read_results(&criterion).unwrap_err();
    assert!(error.to_string().contains("not valid JSON"), "{error}");
}

#[test]
fn the_section_has_the_machine_date_command_chart_link_and_a_table_per_workload() {
    let results = report::read_results(&fixture("section")).unwrap();
    let section = report::render_section(&results, &meta());
    assert!(section.contains("Test CPU 9000, 4 logical cores; Test Linux 1.0, kernel 6.0"));
    assert!(section.contains("rustc 1.95.0 (test)"));
    assert!(section.contains("report 2026-01-02 03:04 UTC"));
    assert!(section.contains("`cargo bench -p benches --bench suite`"));
    assert!(section.contains("6 benchmarks in 2 workloads"), "{section}");
    assert!(section.contains("](benches/suite.svg)"));
    assert_eq!(section.matches("\n### ").count(), 2, "{section}");
    assert!(section.find("### ShallowBind").unwrap() < section.find("### WorkStealing").unwrap());
    assert!(!section.contains(BEGIN_MARKER) && !section.contains(END_MARKER));
}

#[test]
fn a_table_has_ops_and_elements_per_runtime_and_ratios_over_tokio() {
    let results = report::read_results(&fixture("table")).unwrap();
    let section = report::render_section(&results, &meta());

    let shallow = table(&section, "ShallowBind");
    assert_eq!(
        cells(shallow[0]),
        [
            "variant",
            "size",
            "single ops/s",
            "single elements/s",
            "batching ops/s",
            "batching elements/s",
            "tokio ops/s",
            "tokio elements/s",
            "single/tokio",
            "batching/tokio",
        ]
    );
    assert_eq!(shallow.len(), 4, "header, rule, pure, delay: {shallow:?}");
    let pure = cells(shallow[2]);
    assert_eq!(pure[..2], ["pure", "10000"]);
    assert_eq!(pure[2], "20,000 ±2.0%");
    assert_eq!(pure[3], "200 M");
    assert_eq!(pure[6], "5,000 ±2.0%");
    assert_eq!(pure[7], "50.0 M");
    assert_eq!(pure[8], "4.00x");
    assert_eq!(pure[9], "2.50x");

    let work = table(&section, "WorkStealing");
    assert_eq!(
        cells(work[0]),
        [
            "variant",
            "size",
            "wstp ops/s",
            "wstp elements/s",
            "tokio_mt ops/s",
            "tokio_mt elements/s",
            "wstp/tokio_mt"
        ]
    );
    assert_eq!(cells(work[2])[6], "0.50x");
}

#[test]
fn a_row_without_tokio_shows_n_a_in_the_tokio_and_ratio_columns() {
    let results = report::read_results(&fixture("n-a")).unwrap();
    let section = report::render_section(&results, &meta());
    let delay = cells(table(&section, "ShallowBind")[3]);
    assert_eq!(delay[..4], ["delay", "10000", "10,000 ±2.0%", "100 M"]);
    assert_eq!(delay[4..], ["n/a", "n/a", "n/a", "n/a", "n/a", "n/a"]);
}

#[test]
fn replacing_the_section_keeps_every_byte_outside_the_markers() {
    let before = "# Title\r\n\nintro  \n\n## Suite\n\n";
    let after = "\n\ntail without newline";
    let doc = format!("{before}{BEGIN_MARKER}\nold\nsection\n{END_MARKER}{after}");
    let out = report::replace_section(&doc, "new section\n").unwrap();
    assert_eq!(
        out,
        format!("{before}{BEGIN_MARKER}\n\nnew section\n\n{END_MARKER}{after}")
    );
    // Idempotent: the same section again changes nothing.
    assert_eq!(report::replace_section(&out, "new section\n").unwrap(), out);
}

#[test]
fn a_file_without_markers_gets_a_suite_section_appended() {
    let doc = "# Benchmarks\n\ntext";
    let out = report::replace_section(doc, "body").unwrap();
    assert_eq!(
        out,
        format!("# Benchmarks\n\ntext\n\n## Suite\n\n{BEGIN_MARKER}\n\nbody\n\n{END_MARKER}\n")
    );
    assert!(out.starts_with(doc));
    // The next run replaces that section instead of appending another.
    assert_eq!(report::replace_section(&out, "body").unwrap(), out);
}

#[test]
fn mismatched_markers_are_errors() {
    let cases = [
        (format!("a\n{BEGIN_MARKER}\nb"), MarkerError::MissingEnd),
        (format!("a\n{END_MARKER}\nb"), MarkerError::MissingBegin),
        (
            format!("{END_MARKER}\n{BEGIN_MARKER}\n"),
            MarkerError::EndBeforeBegin,
        ),
        (
            format!("{BEGIN_MARKER}\n{END_MARKER}\n{BEGIN_MARKER}\n{END_MARKER}\n"),
            MarkerError::Repeated(BEGIN_MARKER),
        ),
        (
            format!("{BEGIN_MARKER}\n{END_MARKER}\n{END_MARKER}\n"),
            MarkerError::Repeated(END_MARKER),
        ),
    ];
    for (doc, expected) in cases {
        assert_eq!(report::replace_section(&doc, "x"), Err(expected), "{doc}");
    }
}

#[test]
fn the_chart_is_an_svg_with_a_panel_per_workload_and_a_bar_per_result() {
    let results = report::read_results(&fixture("svg")).unwrap();
    let svg = report::render_svg(&results).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for text in [
        "ShallowBind",
        "WorkStealing",
        "single",
        "batching",
        "tokio_mt",
        "scheduling",
    ] {
        assert!(
            svg.contains(&format!(">\n{text}\n</text>")),
            "{text} in the chart"
        );
    }
    assert!(svg.contains(">\nops/s\n</text>"), "the y axis reads ops/s");
}

#[test]
fn the_chart_plots_ops_per_second_so_a_workload_without_declared_elements_has_its_panel() {
    let criterion = temp_dir("svg-no-elements").join("criterion");
    write_result(&criterion, "suite.Ref.modify", "single", "10000", 1e6, None);
    write_result(&criterion, "suite.Ref.modify", "tokio", "10000", 2e6, None);
    let results = report::read_results(&criterion).unwrap();
    let svg = report::render_svg(&results).unwrap();
    assert!(svg.contains(">\nRef\n</text>"), "the Ref panel is drawn");
    assert!(!svg.contains("no suite.* results"));
    // One filled bar per result: single's and tokio's colours.
    for color in ["#1F77B4", "#FF7F0E"] {
        assert!(
            svg.contains(&format!("fill=\"{color}\"")),
            "a bar in {color}"
        );
    }
}

#[test]
fn a_run_writes_the_chart_and_regenerates_only_the_section() {
    let criterion = fixture("run");
    let dir = criterion.parent().unwrap();
    let out = dir.join("BENCHMARKS.md");
    let before = "# Benchmarks\n\nhand-written\n\n## Suite\n\n";
    let after = "\n\n## Later\n\nmore hand-written text\n";
    fs::write(
        &out,
        format!("{before}{BEGIN_MARKER}\nstale\n{END_MARKER}{after}"),
    )
    .unwrap();
    let options = Options {
        criterion: criterion.clone(),
        out: out.clone(),
        svg: dir.join("charts/suite.svg"),
        command: "cargo bench -p benches --bench suite -- --quick".to_string(),
    };
    let summary = report::run(&options).unwrap();
    assert_eq!((summary.results, summary.workloads), (6, 2));
    assert!(!summary.appended && summary.changed);

    let doc = fs::read_to_string(&out).unwrap();
    assert!(
        doc.starts_with(&format!("{before}{BEGIN_MARKER}\n")),
        "{doc}"
    );
    assert!(doc.ends_with(&format!("\n{END_MARKER}{after}")), "{doc}");
    assert!(!doc.contains("stale"));
    assert!(doc.contains("`cargo bench -p benches --bench suite -- --quick`"));
    assert!(doc.contains("](charts/suite.svg)"), "{doc}");
    let svg = fs::read_to_string(dir.join("charts/suite.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
}

#[test]
fn a_run_with_mismatched_markers_writes_nothing() {
    let criterion = fixture("run-markers");
    let dir = criterion.parent().unwrap();
    let out = dir.join("BENCHMARKS.md");
    let doc = format!("# Benchmarks\n{BEGIN_MARKER}\nno end\n");
    fs::write(&out, &doc).unwrap();
    let svg = dir.join("suite.svg");
    let options = Options {
        criterion,
        out: out.clone(),
        svg: svg.clone(),
        command: report::DEFAULT_COMMAND.to_string(),
    };
    let error = report::run(&options).unwrap_err();
    assert!(error.to_string().contains("BENCHMARKS.md"), "{error}");
    assert!(error.to_string().contains("without"), "{error}");
    assert_eq!(fs::read_to_string(&out).unwrap(), doc);
    assert!(!svg.exists());
}

#[test]
fn the_binary_reports_an_unreadable_output_file_and_a_bad_argument() {
    let criterion = fixture("bin");
    let dir = criterion.parent().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--criterion")
        .arg(&criterion)
        .arg("--out")
        .arg(dir.join("missing.md"))
        .arg("--svg")
        .arg(dir.join("suite.svg"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read") && stderr.contains("missing.md"),
        "{stderr}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--frobnicate")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown argument \"--frobnicate\""));
}

#[test]
fn the_machine_fields_come_from_cpuinfo_and_os_release_text() {
    let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
    assert_eq!(report::cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
    assert_eq!(report::cpu_count(cpuinfo), 2);
    let os_release = "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n";
    assert_eq!(
        report::os_pretty_name(os_release).as_deref(),
        Some("Ubuntu 24.04.1 LTS")
    );
    assert_eq!(report::format_utc(0), "1970-01-01 00:00 UTC");
    assert_eq!(report::format_utc(1_709_210_096), "2024-02-29 12:34 UTC");
}

#[test]
fn command_line_flags_override_the_defaults() {
    let args = [
        "--criterion",
        "c",
        "--out=o.md",
        "--svg",
        "s.svg",
        "--command",
        "cargo bench x",
    ];
    let parsed = report::parse_args(args.iter().map(|s| s.to_string())).unwrap();
    assert_eq!(
        parsed,
        report::Invocation::Run(Options {
            criterion: "c".into(),
            out: "o.md".into(),
            svg: "s.svg".into(),
            command: "cargo bench x".into(),
        })
    );
    assert!(matches!(
        report::parse_args(["--out".to_string()]),
        Err(ReportError::Usage(_))
    ));
    assert_eq!(
        report::relative_link(Path::new("a"), Path::new("a/b/c.svg")),
        "b/c.svg"
    );
    assert_eq!(
        report::relative_link(Path::new("a/x"), Path::new("a/b.svg")),
        "../b.svg"
    );
}
