//! Ordinary work runs unchanged: everyday developer scenarios (git, Python, Node, Rust, C, tmux, gpg, ssh-agent,
//! FIFOs, locks, shared memory, sockets, loopback servers, the shell's own features) run once under plain `bash -c`
//! and once through the facade with the default configuration, each in a fresh directory, and their exit statuses
//! and outputs (the directory written as `$W`) must be the same. A scenario whose tool is missing here is skipped,
//! saying so. The suite reports its counts per network mode: under `loopback` and `allow` every scenario runs as
//! under bash, under `none` every one but the two that need the loopback network (a session's own Unix sockets
//! connect in every mode; the host's stay cut — `shellward-exec`'s `unix_sockets` tests).

#![cfg(unix)]

use crate::common::*;
use shellward::{Config, Shellward};
use shellward_test_support::compat::{
    NEED_LOOPBACK, SCENARIOS, Scenario, Seen, available, command, normalized, under_bash,
};

/// Through the facade (its default shell is `sh`; bash is asked for, as for plain bash), in a fresh directory.
async fn under_shellward(sw: &Shellward, s: &Scenario) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    let mut args = exec(&command(s));
    args.workdir = Some(dir_path.display().to_string());
    let r = run(sw, args.timeout("2m")).await;
    Seen {
        exit: r.exit_code,
        output: normalized(&r.output, &dir_path),
    }
}

/// Runs every scenario both ways; returns (identical, differing with both sides, skipped with the missing tool).
async fn compare(network: &str) -> (Vec<&'static str>, Vec<String>, Vec<String>) {
    let mark = new_mark();
    let mut config = Config::default();
    config.executor.grace = std::time::Duration::from_millis(300);
    config.executor.env.set_var(MARK, &mark);
    config.confinement.network = match network {
        "none" => shellward::exec::Network::None,
        "loopback" => shellward::exec::Network::Loopback,
        "allow" => {
            config.confinement.allow = vec!["example.invalid".into()];
            shellward::exec::Network::Allow
        }
        _ => shellward::exec::Network::Host,
    };
    let sw = Shellward::builder().config(config).build().expect("build");
    let (mut same, mut differ, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    // The whole suite's time each way (interleaved, scenario by scenario).
    let (mut bash_time, mut ours_time) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for s in SCENARIOS {
        if let Some(tool) = s.needs.iter().find(|t| !available(t)) {
            skipped.push(format!("{}: no {tool} here", s.name));
            continue;
        }
        let t = std::time::Instant::now();
        let plain = under_bash(s);
        bash_time += t.elapsed();
        let t = std::time::Instant::now();
        let ours = under_shellward(&sw, s).await;
        ours_time += t.elapsed();
        if plain == ours {
            same.push(s.name);
        } else {
            differ.push(format!(
                "{}:\n  bash:      {plain:?}\n  shellward: {ours:?}",
                s.name
            ));
        }
    }
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty(), "a scenario left processes");
    println!(
        "network {network}: the scenarios took {:.1} s under bash and {:.1} s through shellward",
        bash_time.as_secs_f64(),
        ours_time.as_secs_f64()
    );
    (same, differ, skipped)
}

fn report(network: &str, same: &[&str], differ: &[String], skipped: &[String]) {
    let ran = same.len() + differ.len();
    println!(
        "network {network}: {} of {ran} scenarios identical under shellward and bash ({} skipped)",
        same.len(),
        skipped.len()
    );
    for d in differ {
        println!("differs: {d}");
    }
    for s in skipped {
        println!("skipped: {s}");
    }
}

/// Under the default configuration every scenario this machine can run behaves as under plain bash — at least 95 %,
/// and every difference is printed (none is expected: the defaults are what ordinary work needs).
async fn default_configuration_runs_ordinary_work() {
    let (same, differ, skipped) = compare("host").await;
    report("host", &same, &differ, &skipped);
    let ran = same.len() + differ.len();
    assert!(
        ran >= 40,
        "only {ran} scenarios could run here: {skipped:?}"
    );
    assert!(
        same.len() * 100 >= ran * 95,
        "{} of {ran} identical; the differences:\n{}",
        same.len(),
        differ.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_work_runs_as_under_bash() {
    default_configuration_runs_ordinary_work().await;
}

/// [`ordinary_work_runs_as_under_bash`] as an unprivileged user (its sandbox in a user namespace of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_work_runs_as_under_bash_for_a_normal_user() {
    const AS_USER: &str = "SHELLWARD_TEST_COMPAT_AS_USER";
    if !shellward_test_support::in_fresh_process(AS_USER) {
        let out = shellward_test_support::rerun_as_user(
            shellward_test_support::test_path!(
                "ordinary_work_runs_as_under_bash_for_a_normal_user"
            ),
            AS_USER,
        );
        // The rerun's report, for the figures.
        for line in out.lines() {
            if let Some(i) = line.find("network ").or_else(|| line.find("differs: ")) {
                println!("as a normal user: {}", &line[i..]);
            }
        }
        return;
    }
    assert!(
        !shellward_test_support::is_root(),
        "the rerun is still root"
    );
    default_configuration_runs_ordinary_work().await;
}

/// Under `network = "none"` the counts are reported and the differences listed: every scenario but those that need
/// the loopback network runs as under bash — their own Unix sockets included (tmux, gpg-agent, ssh-agent, Python's
/// forkserver: the sandbox's socket broker connects a session's own sockets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_work_without_a_network_is_reported() {
    let (same, differ, skipped) = compare("none").await;
    report("none", &same, &differ, &skipped);
    let unexpected: Vec<&String> = differ
        .iter()
        .filter(|d| {
            !NEED_LOOPBACK
                .iter()
                .any(|n| d.starts_with(&format!("{n}:")))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} of {} identical; scenarios that need no network differ:\n{}",
        same.len(),
        same.len() + differ.len(),
        unexpected
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Under `network = "loopback"` and `"allow"` (a proxy to named hosts) every scenario runs as under bash: each has a
/// loopback of its own, and its own Unix sockets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_work_with_a_loopback_or_allow_list_network_runs_as_under_bash() {
    for network in ["loopback", "allow"] {
        let (same, differ, skipped) = compare(network).await;
        report(network, &same, &differ, &skipped);
        assert!(
            differ.is_empty(),
            "network {network}: {} of {} identical:\n{}",
            same.len(),
            same.len() + differ.len(),
            differ.join("\n")
        );
    }
}
