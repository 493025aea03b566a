//! What a command must not reach of what outlives it, as the attack runs tried it: the names leading to the policy
//! cache and the configuration (renamed away and rebuilt, the next start would trust the command's copy), and other
//! sessions' output (read from the log files, within this instance and across instances). Each test gives the
//! command every write it could ask for (its whole test directory is writable) and only the default policy, so what
//! stops it is the host, not a rule.

// Unix only: these tests prove what the session sandbox does on Linux (mount namespaces).
#![cfg(unix)]

use crate::common::*;
use shellward::tools::ExecuteResult;
use shellward::{Config, Shellward};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// An instance whose configuration file is `<dir>/proj/.shellward/shellward.toml`, whose policy cache is
/// `<dir>/home/.cache/shellward/policies`, with all of `<dir>` writable and the default policy alone.
fn build(dir: &Path, mark: &str) -> Shellward {
    build_logging_to(dir, mark, None)
}

/// [`build`], its log directories under `log_dir` instead of the default parent when given.
fn build_logging_to(dir: &Path, mark: &str, log_dir: Option<&Path>) -> Shellward {
    let config_dir = dir.join("proj/.shellward");
    std::fs::create_dir_all(&config_dir).unwrap();
    let file = config_dir.join("shellward.toml");
    std::fs::write(
        &file,
        format!(
            "[[policy]]\nbuiltin = \"default\"\n[sandbox]\ncache_dir = \"{}/home/.cache/shellward/policies\"\n\
             [confinement]\nwritable = [\"{}\"]\n[executor]\nworkdir = \"{}/proj\"\ngrace = \"300ms\"\n{}\
             [env.set]\n{MARK} = \"{mark}\"\n",
            dir.display(),
            dir.display(),
            dir.display(),
            log_dir
                .map(|d| format!("log_dir = \"{}\"\n", d.display()))
                .unwrap_or_default()
        ),
    )
    .unwrap();
    Shellward::builder()
        .config(Config::load(&file).expect("config"))
        .build()
        .expect("build")
}

async fn run(sw: &Shellward, session: &str, command: &str) -> ExecuteResult {
    sw.at(Some(session))
        .execute(exec(command), ExecuteOptions::new())
        .await
        .unwrap_or_else(|e| panic!("{command}: {e}"))
}

fn inode(p: &Path) -> (u64, u64) {
    let m = std::fs::metadata(p).unwrap();
    (m.dev(), m.ino())
}

/// The attack: rename the directory holding the cache (or the configuration) away — the kernel allows it with mounts
/// below — and build one of the command's own in its place. Every name on the way is pinned now: each rename is
/// refused, the files stay the host's, and writes elsewhere in the same writable tree still work.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_rename_the_policy_cache_or_the_configuration_away() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let sw = build(&d, &mark);
    let cache = d.join("home/.cache/shellward");
    let before = [
        inode(&cache),
        inode(&d.join("home/.cache")),
        inode(&d.join("proj/.shellward")),
    ];
    for (what, command) in [
        (
            "the cache's parent",
            format!(
                "mv {0}/home/.cache/shellward {0}/home/.cache/moved",
                d.display()
            ),
        ),
        (
            "the cache's grandparent",
            format!("mv {0}/home/.cache {0}/home/cache2", d.display()),
        ),
        ("the home", format!("mv {0}/home {0}/home2", d.display())),
        (
            "the cache itself",
            format!("mv {0}/home/.cache/shellward/policies {0}/p2", d.display()),
        ),
        (
            "the configuration's directory",
            format!("mv {0}/proj/.shellward {0}/proj/x", d.display()),
        ),
        (
            "the working directory holding it",
            format!("mv {0}/proj {0}/proj2", d.display()),
        ),
        (
            "the configuration",
            format!(
                "echo '[[policy]]' > {0}/proj/.shellward/shellward.toml",
                d.display()
            ),
        ),
        (
            "a new cache entry",
            format!(
                "touch {0}/home/.cache/shellward/policies/planted",
                d.display()
            ),
        ),
    ] {
        let r = run(&sw, "attacker", &command).await;
        assert_ne!(
            r.exit_code,
            Some(0),
            "{what}: {command} succeeded: {}",
            r.output
        );
    }
    // Writes the confinement allows still work beside them.
    let r = run(
        &sw,
        "attacker",
        &format!(
            "mkdir {0}/home/.cache/other && touch {0}/proj/.shellward-not && echo ok",
            d.display()
        ),
    )
    .await;
    assert_eq!(r.exit_code, Some(0), "{}", r.output);
    sw.shutdown().await;
    let after = [
        inode(&cache),
        inode(&d.join("home/.cache")),
        inode(&d.join("proj/.shellward")),
    ];
    assert_eq!(before, after, "a directory on the way was replaced");
    assert!(!cache.join("policies/planted").exists());
    let config = Config::load(&d.join("proj/.shellward/shellward.toml")).expect("config");
    assert_eq!(config.policies.len(), 1);
    assert!(survivors(&mark).is_empty());
}

/// Session B cannot read session A's output from the log files (`log_path` of A's result), nor find it by searching
/// the log root; A reads its own; a second instance's session cannot read either.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_reads_only_its_own_logs() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let sw = build(&d, &mark);
    let secret = format!("secret-of-a-{}", std::process::id());
    let a = run(&sw, "a", &format!("echo {secret}")).await;
    let log = a.log_path.clone().expect("a log path");
    let root = Path::new(&log).ancestors().nth(3).unwrap().to_path_buf();
    assert!(
        root.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(".shellward-logs-"),
        "{log}"
    );
    let own = run(&sw, "a", &format!("cat {log}")).await;
    assert_eq!(own.output.trim(), secret, "a session reads its own log");
    let peek = format!(
        "cat {log}; grep -rs {secret} {} && echo FOUND",
        root.display()
    );
    let b = run(&sw, "b", &peek).await;
    assert!(
        !b.output.contains("FOUND") && !b.output.contains(&secret[..]),
        "{}",
        b.output
    );
    let other_dir = tempfile::tempdir().unwrap();
    let other = build(&other_dir.path().canonicalize().unwrap(), &mark);
    let c = run(&other, "a", &peek).await;
    assert!(
        !c.output.contains("FOUND") && !c.output.contains(&secret[..]),
        "{}",
        c.output
    );
    other.shutdown().await;
    // An instance whose logs go elsewhere (`[executor] log_dir`) still cannot read the default root's.
    let third_dir = tempfile::tempdir().unwrap();
    let third_path = third_dir.path().canonicalize().unwrap();
    let elsewhere = third_path.join("logs");
    std::fs::create_dir(&elsewhere).unwrap();
    let third = build_logging_to(&third_path, &mark, Some(&elsewhere));
    let t = run(&third, "a", &peek).await;
    assert!(
        !t.output.contains("FOUND") && !t.output.contains(&secret[..]),
        "{}",
        t.output
    );
    assert!(
        t.log_path
            .as_deref()
            .unwrap_or_default()
            .starts_with(elsewhere.to_str().unwrap()),
        "{t:?}"
    );
    third.shutdown().await;
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the session sandbox in a user namespace of its own).
    every_host_files_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_HOST_FILES_AS_USER"
);
