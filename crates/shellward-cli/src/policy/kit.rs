//! `shellward policy test | bench | inspect`: work with policy components in isolation, without running commands.

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;
use shellward_policy::cases::{CaseFile, CaseResult, PolicyUnderTest, discover, run_file};
use shellward_policy::duration;
use shellward_policy::{
    FaultMode, InstanceMode, PolicyChain, PolicyEngine, Request, SandboxConfig, WIT_PACKAGE,
    WIT_VERSION, supported_ranges,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Sandbox options for the kit commands.
#[derive(Args, Debug, Clone)]
pub struct SandboxArgs {
    /// Deadline for one policy call, e.g. 100ms.
    #[arg(long, value_name = "DURATION", default_value = "100ms")]
    pub deadline: String,
    /// Memory cap per policy instance, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub memory_mib: usize,
    /// Directory of the precompile cache (default: $SHELLWARD_CACHE_DIR or the user cache dir).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not use the precompile cache.
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,
}

impl SandboxArgs {
    /// The sandbox configuration these options describe.
    pub fn config(&self) -> Result<SandboxConfig> {
        let deadline = duration::parse_millis(&self.deadline).context("--deadline")?;
        if deadline == 0 {
            bail!("--deadline must be greater than zero, e.g. 100ms");
        }
        let mut config = SandboxConfig::default()
            .deadline(Duration::from_millis(deadline))
            .memory_limit(
                self.memory_mib
                    .checked_mul(1 << 20)
                    .context("--memory-mib is too large")?,
            );
        if self.no_cache {
            config.cache_dir = None;
        } else if let Some(dir) = &self.cache_dir {
            config.cache_dir = Some(dir.clone());
        }
        Ok(config)
    }
}

/// Where case files are discovered for a policy argument: a built-in's source directory in a checkout
/// (`policies/NAME/`), else the argument itself.
fn builtin_source(arg: &Path) -> PathBuf {
    match arg.to_str() {
        Some(name) if !arg.exists() && shellward_policy::embedded::builtin(name).is_some() => {
            PathBuf::from(format!("policies/{name}/{name}.wasm"))
        }
        _ => arg.to_path_buf(),
    }
}

/// Reads a policy argument: a component file, or `default` / `guard` for a built-in policy.
pub fn read_policy(arg: &Path) -> Result<PolicyUnderTest> {
    if !arg.exists()
        && let Some(name) = arg.to_str()
        && let Some(bytes) = shellward_policy::embedded::builtin(name)
    {
        return Ok(PolicyUnderTest {
            name: name.into(),
            bytes: bytes.to_vec(),
        });
    }
    let bytes = std::fs::read(arg).with_context(|| {
        format!(
            "cannot read policy {}; give a component file (.wasm), `default` or `guard`",
            arg.display()
        )
    })?;
    Ok(PolicyUnderTest {
        name: arg.display().to_string(),
        bytes,
    })
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// A policy of a chain to test (repeatable, in chain order). Without it, the first positional argument is the
    /// policy.
    #[arg(long = "policy", value_name = "FILE")]
    pub policies: Vec<PathBuf>,
    /// POLICY (a .wasm, or `default` for the embedded policy) unless --policy is given, then case files. Without
    /// case files, the policy's `cases.toml` is discovered (next to it, in an ancestor, or policies/NAME/cases.toml).
    #[arg(value_name = "POLICY | CASES")]
    pub paths: Vec<PathBuf>,
    /// Run only cases whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Print results as JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format: text (default), json, junit (JUnit XML for CI dashboards: one testcase per case, a failure with
    /// expected and actual per mismatch), tap (TAP version 13 with a plan line).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Report which of the policies' rules (their `rules` export) the cases exercised and which they never hit; for
    /// policies that name no rules, which kinds of outcome (deny, rewrite, background, note, confinement) they
    /// produced. With --format junit or tap the report goes to standard error.
    #[arg(long)]
    pub coverage: bool,
    /// Fail (exit 1) when coverage is below this percentage (0 to 100); implies --coverage.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub min_coverage: Option<u8>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// The output formats of `policy test`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// For people.
    Text,
    /// For tools.
    Json,
    /// JUnit XML.
    Junit,
    /// Test Anything Protocol, version 13.
    Tap,
}

/// `text` escaped for XML character data and attribute values; characters XML 1.0 cannot carry (control characters
/// other than tab, newline and carriage return) are written as `\u{..}`.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// The results as JUnit XML: a suite per case file, a testcase per case, a failure per failed case listing its
/// mismatches.
fn junit(results: &[CaseResult]) -> String {
    let failed = results.iter().filter(|r| !r.passed()).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"shellward policy test\" tests=\"{}\" \
         failures=\"{failed}\">\n",
        results.len()
    );
    let mut files: Vec<&Path> = Vec::new();
    for r in results {
        if !files.contains(&r.file.as_path()) {
            files.push(&r.file);
        }
    }
    for file in files {
        let cases: Vec<&CaseResult> = results.iter().filter(|r| r.file == file).collect();
        let name = xml_escape(&file.display().to_string());
        out.push_str(&format!(
            "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{}\">\n",
            cases.len(),
            cases.iter().filter(|r| !r.passed()).count()
        ));
        for r in cases {
            out.push_str(&format!(
                "    <testcase classname=\"{name}\" name=\"{}\"",
                xml_escape(&r.name)
            ));
            if r.passed() {
                out.push_str("/>\n");
                continue;
            }
            let summary: Vec<String> = r
                .mismatches
                .iter()
                .map(|m| format!("{}: expected {}, got {}", m.field, m.expected, m.actual))
                .collect();
            let details: Vec<String> = r.mismatches.iter().map(|m| m.to_string()).collect();
            out.push_str(&format!(
                ">\n      <failure type=\"mismatch\" message=\"{}\">{}</failure>\n    </testcase>\n",
                xml_escape(&summary.join("; ")),
                xml_escape(&details.join("\n"))
            ));
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// `text` as a YAML double-quoted scalar (for TAP's diagnostic block).
fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// The results as TAP version 13: a plan line, `ok`/`not ok` per case, a YAML block with the mismatches.
fn tap(results: &[CaseResult]) -> String {
    let mut out = format!("TAP version 13\n1..{}\n", results.len());
    for (i, r) in results.iter().enumerate() {
        // `#` starts a directive in TAP: keep it out of the description.
        let description = format!("{}: {}", r.file.display(), r.name).replace('#', "\\#");
        let description = description.replace('\n', " ");
        if r.passed() {
            out.push_str(&format!("ok {} - {description}\n", i + 1));
            continue;
        }
        out.push_str(&format!(
            "not ok {} - {description}\n  ---\n  mismatches:\n",
            i + 1
        ));
        for m in &r.mismatches {
            out.push_str(&format!(
                "    - field: {}\n      expected: {}\n      actual: {}\n",
                yaml_string(&m.field),
                yaml_string(&m.expected),
                yaml_string(&m.actual)
            ));
        }
        out.push_str("  ...\n");
    }
    out
}

fn case_json(r: &CaseResult) -> serde_json::Value {
    json!({
        "file": r.file,
        "name": r.name,
        "passed": r.passed(),
        "mismatches": r.mismatches.iter().map(|m| json!({
            "field": m.field, "expected": m.expected, "actual": m.actual,
        })).collect::<Vec<_>>(),
    })
}

pub fn test(args: TestArgs) -> Result<ExitCode> {
    let (policies, case_files) = test_inputs(&args)?;
    let engine = PolicyEngine::new(args.sandbox.config()?)?;
    let mut results = Vec::new();
    // The first case file's settings, for listing the policies' rules (rules may depend on settings).
    let mut rule_settings: Option<Vec<String>> = None;
    for path in &case_files {
        let file = CaseFile::load(path)?;
        if rule_settings.is_none() {
            rule_settings = Some(
                (0..policies.len())
                    .map(|i| {
                        file.settings
                            .as_ref()
                            .and_then(|s| s.for_policy(i).ok())
                            .unwrap_or_default()
                    })
                    .collect(),
            );
        }
        results.extend(run_file(
            &engine,
            &policies,
            path,
            &file,
            args.filter.as_deref(),
        )?);
    }
    let coverage = if args.coverage || args.min_coverage.is_some() {
        Some(crate::policy::coverage::Coverage::compute(
            &engine,
            &policies,
            rule_settings.as_deref().unwrap_or_default(),
            &results,
        )?)
    } else {
        None
    };
    let format = match (args.json, args.format) {
        (true, _) => Format::Json,
        (false, f) => f.unwrap_or(Format::Text),
    };
    print_results(format, &results, coverage.as_ref())?;
    Ok(test_status(&results, args.min_coverage, coverage.as_ref()))
}

/// The policies under test (read) and the case files: given, or discovered for the first policy.
fn test_inputs(args: &TestArgs) -> Result<(Vec<PolicyUnderTest>, Vec<PathBuf>)> {
    let mut paths = args.paths.clone();
    let policy_paths: Vec<PathBuf> = if args.policies.is_empty() {
        if paths.is_empty() {
            bail!(
                "give the policy to test: `shellward policy test POLICY.wasm [CASES.toml]...` (or `default` for the \
                 embedded policy)"
            );
        }
        vec![paths.remove(0)]
    } else {
        args.policies.clone()
    };
    let policies: Vec<PolicyUnderTest> = policy_paths
        .iter()
        .map(|p| read_policy(p))
        .collect::<Result<_>>()?;
    let case_files = if paths.is_empty() {
        let first = &policy_paths[0];
        let found = discover(&builtin_source(first));
        vec![found.with_context(|| {
            format!(
                "no case file given and none found for {}: looked for cases.toml beside it and in its ancestors, \
                 and policies/NAME/cases.toml; give the case files as arguments",
                first.display()
            )
        })?]
    } else {
        paths
    };
    Ok((policies, case_files))
}

/// The results in `format` on stdout (with JUnit and TAP, the coverage goes to stderr).
fn print_results(
    format: Format,
    results: &[CaseResult],
    coverage: Option<&crate::policy::coverage::Coverage>,
) -> Result<()> {
    let passed = results.iter().filter(|r| r.passed()).count();
    let failed = results.len() - passed;
    match format {
        Format::Junit | Format::Tap => {
            print!(
                "{}",
                if format == Format::Junit {
                    junit(results)
                } else {
                    tap(results)
                }
            );
            if let Some(c) = coverage {
                eprint!("{}", c.text());
            }
        }
        Format::Json => {
            let mut value = json!({
                "passed": passed,
                "failed": failed,
                "cases": results.iter().map(case_json).collect::<Vec<_>>(),
            });
            if let Some(c) = coverage {
                value["coverage"] = c.json();
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        Format::Text => {
            print!("{}", results_text(results));
            println!("{passed} passed, {failed} failed");
            if let Some(c) = coverage {
                print!("{}", c.text());
            }
        }
    }
    Ok(())
}

/// The text report: each file, then each case (`ok` or `FAIL` with its expected and actual fields).
fn results_text(results: &[CaseResult]) -> String {
    let mut out = String::new();
    let mut current: Option<&Path> = None;
    for r in results {
        if current != Some(r.file.as_path()) {
            out.push_str(&format!("{}\n", r.file.display()));
            current = Some(r.file.as_path());
        }
        if r.passed() {
            out.push_str(&format!("  ok    {}\n", r.name));
            continue;
        }
        out.push_str(&format!("  FAIL  {}\n", r.name));
        for m in &r.mismatches {
            out.push_str(&format!(
                "        {}:\n            expected: {}\n            actual:   {}\n",
                m.field, m.expected, m.actual
            ));
        }
    }
    out
}

/// The exit status: 1 when nothing matched, coverage is below `min_coverage`, or any case failed.
fn test_status(
    results: &[CaseResult],
    min_coverage: Option<u8>,
    coverage: Option<&crate::policy::coverage::Coverage>,
) -> ExitCode {
    if results.is_empty() {
        eprintln!("shellward: no case matched; check --filter");
        return ExitCode::from(1);
    }
    if let (Some(min), Some(c)) = (min_coverage, coverage)
        && c.percent() < f64::from(min)
    {
        eprintln!(
            "shellward: coverage {:.0}% is below --min-coverage {min}%: add cases that exercise {}",
            c.percent(),
            c.missed().join(", ")
        );
        return ExitCode::from(1);
    }
    if results.iter().all(|r| r.passed()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The policy component (.wasm), or `default` for the embedded policy.
    pub policy: PathBuf,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn inspect(args: InspectArgs) -> Result<ExitCode> {
    let policy = read_policy(&args.policy)?;
    let engine = PolicyEngine::new(SandboxConfig::default().cache_dir(None))?;
    let info = engine.inspect(&policy.name, &policy.bytes)?;
    let verdict = info.check(&policy.name).map_err(|e| e.to_string());
    let package = info
        .wit_version
        .as_ref()
        .map(|v| format!("{WIT_PACKAGE}@{v}"));
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "file": policy.name,
                "size_bytes": policy.bytes.len(),
                "package": package,
                "exports": info.exports,
                "imports": info.imports,
                "host_supports": format!("{WIT_PACKAGE}@{WIT_VERSION}"),
                "host_loads": supported_ranges(),
                "compatible": verdict.is_ok(),
                "adapted": verdict.is_ok() && info.adapted_from().is_some(),
                "adapted_from": info.adapted_from().filter(|_| verdict.is_ok()),
                "reason": verdict.as_ref().err(),
            }))?
        );
    } else {
        println!("file:        {}", policy.name);
        println!("size:        {} bytes", policy.bytes.len());
        println!(
            "built for:   {}",
            package
                .as_deref()
                .unwrap_or("(does not export the shellward policy interface)")
        );
        println!("exports:");
        for e in &info.exports {
            println!("  {e}");
        }
        println!("imports:");
        for i in &info.imports {
            println!("  {i}");
        }
        match &verdict {
            Ok(()) if info.adapted_from().is_some() => println!(
                "compatible:  yes, through the {} adapter (this host's contract is {WIT_PACKAGE}@{WIT_VERSION}; the \
                 policy does not see what later versions added, which passes through as the caller or the operator \
                 gave it: {})",
                info.adapted_from()
                    .and_then(|v| v.rsplit_once('.'))
                    .map_or("", |(minor, _)| minor),
                if info.adapted_from() == Some("0.1.0") {
                    "interactive, tty, the confinement and the start-up wait"
                } else {
                    "the confinement and the start-up wait; it names no rules"
                }
            ),
            Ok(()) => println!(
                "compatible:  yes (this host loads {WIT_PACKAGE} {})",
                supported_ranges()
            ),
            Err(why) => println!("compatible:  no: {why}"),
        }
    }
    Ok(if verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The policy component (.wasm), or `default` for the embedded policy.
    pub policy: PathBuf,
    /// Requests to evaluate, from a case file (default: the policy's discovered cases.toml, else built-in commands).
    #[arg(long, value_name = "FILE")]
    pub cases: Option<PathBuf>,
    /// Evaluations per mode (fresh-instance mode runs a tenth, at least 20).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub iterations: usize,
    /// Settings (JSON) for the policy.
    #[arg(long, value_name = "JSON", default_value = "")]
    pub settings: String,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Latency statistics in nanoseconds.
struct Stats {
    min: u128,
    median: u128,
    p99: u128,
    n: usize,
}

fn stats(mut samples: Vec<u128>) -> Stats {
    samples.sort_unstable();
    let n = samples.len();
    let at = |q: f64| samples[((n as f64 * q) as usize).min(n - 1)];
    Stats {
        min: samples[0],
        median: at(0.5),
        p99: at(0.99),
        n,
    }
}

fn show(ns: u128) -> String {
    if ns < 10_000 {
        format!("{:.2} µs", ns as f64 / 1000.0)
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1000.0)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

const BUILTIN_COMMANDS: &[&str] = &[
    "ls -la",
    "npm run dev &",
    "cargo test --workspace",
    "cd app && npm start",
    "git status && git diff | head -50",
    "python -m http.server 8000",
    "echo \"x &\" > out.txt",
];

fn measure(chain: &PolicyChain, requests: &[Request], iterations: usize) -> Stats {
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let r = &requests[i % requests.len()];
        let t = Instant::now();
        let d = chain.evaluate(r);
        samples.push(t.elapsed().as_nanos());
        std::hint::black_box(d);
    }
    stats(samples)
}

pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    if args.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    let policy = read_policy(&args.policy)?;
    let cases_path = args
        .cases
        .clone()
        .or_else(|| discover(&builtin_source(&args.policy)));
    let requests: Vec<Request> = match &cases_path {
        Some(p) => CaseFile::load(p)?
            .cases
            .iter()
            .filter(|c| c.settings.is_none())
            .map(|c| c.request())
            .collect(),
        None => BUILTIN_COMMANDS.iter().map(|c| Request::new(*c)).collect(),
    };
    if requests.is_empty() {
        bail!("no requests to evaluate: the case file has none without their own settings");
    }

    // Load times: a cold precompile cache (empty directory), then a warm one, each with a new engine as a new process
    // would have.
    let cache = tempfile::tempdir().context("cannot create a temporary cache directory")?;
    let sandbox = |mode: InstanceMode| {
        SandboxConfig::default()
            .cache_dir(Some(cache.path().to_path_buf()))
            .instance_mode(mode)
    };
    let engine = PolicyEngine::new(sandbox(InstanceMode::Reuse))?;
    let t = Instant::now();
    let reused = engine.load_bytes(&policy.name, &policy.bytes, &args.settings)?;
    let cold = t.elapsed();
    let engine2 = PolicyEngine::new(sandbox(InstanceMode::Reuse))?;
    let t = Instant::now();
    let again = engine2.load_bytes(&policy.name, &policy.bytes, &args.settings)?;
    let warm = t.elapsed();
    drop(again);

    let chain = PolicyChain::new(vec![reused], FaultMode::Deny);
    measure(&chain, &requests, args.iterations.min(1000)); // warm-up
    let reuse = measure(&chain, &requests, args.iterations);

    let fresh_engine = PolicyEngine::new(sandbox(InstanceMode::Fresh))?;
    let fresh_policy = fresh_engine.load_bytes(&policy.name, &policy.bytes, &args.settings)?;
    let fresh_chain = PolicyChain::new(vec![fresh_policy], FaultMode::Deny);
    let fresh = measure(&fresh_chain, &requests, (args.iterations / 10).max(20));

    if args.json {
        let s = |st: &Stats| json!({"min_ns": st.min, "median_ns": st.median, "p99_ns": st.p99, "evaluations": st.n});
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "policy": policy.name,
                "size_bytes": policy.bytes.len(),
                "requests": requests.len(),
                "reused_instance": s(&reuse),
                "fresh_instance": s(&fresh),
                "load_cold_cache_ms": cold.as_secs_f64() * 1000.0,
                "load_warm_cache_ms": warm.as_secs_f64() * 1000.0,
            }))?
        );
    } else {
        println!(
            "policy {} ({} bytes), {} distinct requests{}",
            policy.name,
            policy.bytes.len(),
            requests.len(),
            cases_path
                .map(|p| format!(" from {}", p.display()))
                .unwrap_or_default()
        );
        println!(
            "{:<22} {:>12} {:>12} {:>12} {:>8}",
            "mode", "min", "median", "p99", "n"
        );
        for (name, st) in [("reused instance", &reuse), ("fresh instance", &fresh)] {
            println!(
                "{:<22} {:>12} {:>12} {:>12} {:>8}",
                name,
                show(st.min),
                show(st.median),
                show(st.p99),
                st.n
            );
        }
        println!(
            "load (compile + configure): cold cache {:.1} ms, warm cache {:.1} ms",
            cold.as_secs_f64() * 1000.0,
            warm.as_secs_f64() * 1000.0
        );
        if cfg!(debug_assertions) {
            println!(
                "note: this is a debug build of shellward; build with --release for representative figures"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
