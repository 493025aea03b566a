//! The supervisor out of the command's reach: a root command holds no capability to escape with, cannot unmount its
//! private `/proc`, cannot write a cgroup (another tree's `cgroup.kill`, or its way out of its `pids` group) nor the
//! host's own files; every command runs with `no_new_privs`; and the host is non-dumpable, so a command running as
//! the same user reads neither its environment nor its memory — as root and as a normal user.

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{ExecPlan, Executor, ExecutorConfig};
use std::time::Duration;

/// Capability numbers a command must never hold by default (`capabilities(7)`).
const ESCAPE_CAPS: [(u32, &str); 6] = [
    (2, "CAP_DAC_READ_SEARCH"),
    (16, "CAP_SYS_MODULE"),
    (17, "CAP_SYS_RAWIO"),
    (19, "CAP_SYS_PTRACE"),
    (21, "CAP_SYS_ADMIN"),
    (22, "CAP_SYS_BOOT"),
];

/// The value of `field` (`CapBnd`, `NoNewPrivs`, …) in a `/proc/PID/status` text.
fn status_field<'a>(status: &'a str, field: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} line in {status:?}"))
        .trim()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or_else(|_| panic!("not a hex mask: {s:?}"))
}

/// The v1 `pids` hierarchy's mount point, from this process's mountinfo.
fn pids_mount() -> Option<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()?
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut r = right.split(' ');
            let (fstype, _, options) = (r.next()?, r.next()?, r.next()?);
            (fstype == "cgroup" && options.split(',').any(|o| o == "pids"))
                .then(|| left.split(' ').nth(4).map(str::to_string))?
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_command_holds_no_capability_to_escape_and_cannot_unmount_its_proc() {
    assert!(
        shellward_test_support::is_root(),
        "this test proves the root path: run it as root (CI does)"
    );
    let ex = confined(namespaced()).await;
    let r = ex
        .execute(ExecPlan::new(
            "cat /proc/self/status; umount -l /proc 2>&1; echo umount=$?; \
             mount -t tmpfs none /tmp 2>&1; echo mount=$?; \
             echo visible=$(ls /proc | grep -c '^[0-9]')",
        ))
        .await
        .unwrap();
    let text = &r.output.text;
    for field in ["CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"] {
        let mask = hex(status_field(text, field));
        for (bit, name) in ESCAPE_CAPS {
            assert_eq!(mask & (1 << bit), 0, "{field} holds {name}: {text}");
        }
    }
    let kept = hex(status_field(text, "CapEff"));
    assert_ne!(
        kept & (1 << 1),
        0,
        "CAP_DAC_OVERRIDE (ordinary root work) was dropped: {text}"
    );
    assert_eq!(status_field(text, "NoNewPrivs"), "1", "{text}");
    assert!(
        !text.contains("umount=0"),
        "the private /proc was unmounted: {text}"
    );
    assert!(
        !text.contains("mount=0"),
        "a root command could mount: {text}"
    );
    let visible: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("visible="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no visible= line: {text}"));
    assert!(visible <= 6, "the host's /proc is visible: {text}");
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_can_let_root_commands_keep_a_capability() {
    let mut config = namespaced();
    config.keep_capabilities = vec!["sys_ptrace".into()];
    let ex = confined(config).await;
    let r = ex
        .execute(ExecPlan::new("grep CapBnd /proc/self/status"))
        .await
        .unwrap();
    let mask = hex(status_field(&r.output.text, "CapBnd"));
    assert_ne!(mask & (1 << 19), 0, "CAP_SYS_PTRACE was not kept: {r:?}");
    assert_eq!(mask & (1 << 21), 0, "CAP_SYS_ADMIN was kept: {r:?}");
    ex.shutdown().await;
    let mut config = namespaced();
    config.keep_capabilities = vec!["CAP_SYS_ADMN".into()];
    let e = Executor::new(config).unwrap_err().to_string();
    assert!(
        e.contains("CAP_SYS_ADMN") && e.contains("capabilities(7)"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroups_are_read_only_inside_so_no_tree_is_killed_and_no_limit_left() {
    let ex = confined(namespaced()).await;
    let dir = ex
        .cgroup_dir()
        .expect(
            "this test needs the cgroup path (root with a writable cgroup v2 hierarchy, as CI has)",
        )
        .to_path_buf();
    let pids = pids_mount().expect("this test needs the v1 pids hierarchy (CI has it)");
    // Another tree of the same executor: the target of the attack.
    let mark = new_mark();
    let mut victim = marked_plan("echo started; exec sleep 300", &mark);
    victim.background = true;
    let victim = ex.execute(victim).await.unwrap();
    wait_for_output(&ex, &victim.id, "started").await;
    let attack = format!(
        "echo 1 > {d}/{v}/cgroup.kill; echo kill=$?; echo 1 > {d}/cgroup.kill; echo killall=$?; \
         echo $$ > {pids}/cgroup.procs; echo leave=$?; echo $$ > {root}/cgroup.procs; echo leave2=$?; \
         grep pids /proc/self/cgroup",
        d = dir.display(),
        v = victim.id,
        root = dir.parent().unwrap().display(),
    );
    let r = ex.execute(ExecPlan::new(attack)).await.unwrap();
    let text = &r.output.text;
    for step in ["kill", "killall", "leave", "leave2"] {
        assert!(
            !text.contains(&format!("{step}=0")),
            "{step} succeeded: {text}"
        );
    }
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(
        text.contains("shellward-"),
        "the command left its pids group: {text}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !marked(&mark).is_empty(),
        "the other tree was killed: {text}"
    );
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_s_own_files_and_the_log_directory_are_read_only_inside() {
    let scratch = tempfile::tempdir().unwrap();
    let config_file = scratch.path().join("shellward.toml");
    let drop_ins = scratch.path().join("policies.d");
    std::fs::write(&config_file, "# the operator's\n").unwrap();
    std::fs::create_dir(&drop_ins).unwrap();
    let missing = scratch.path().join("not-made-yet");
    let mut config = namespaced();
    config.read_only_paths = vec![config_file.clone(), drop_ins.clone(), missing];
    let ex = confined(config).await;
    let command = format!(
        "echo evil > {f}; echo config=$?; cp /bin/true {d}/evil.wasm; echo dropin=$?; \
         touch {log}/evil; echo log=$?; cat {f}; touch {s}/beside; echo beside=$?",
        f = config_file.display(),
        d = drop_ins.display(),
        log = ex.log_dir().display(),
        s = scratch.path().display(),
    );
    let r = ex.execute(ExecPlan::new(command)).await.unwrap();
    let text = &r.output.text;
    for step in ["config", "dropin", "log"] {
        assert!(
            !text.contains(&format!("{step}=0")),
            "{step} was written: {text}"
        );
    }
    assert!(
        text.contains("# the operator's"),
        "the config could not be read: {text}"
    );
    assert!(
        text.contains("beside=0"),
        "the directory around it became read-only: {text}"
    );
    assert_eq!(
        std::fs::read_to_string(&config_file).unwrap(),
        "# the operator's\n"
    );
    assert!(std::fs::read_dir(&drop_ins).unwrap().next().is_none());
    ex.shutdown().await;
}

/// Reads the host's environment and memory from a command of the same user; both must be refused.
async fn the_host_stays_unreadable(ex: &Executor) {
    // SAFETY: prctl with constant arguments.
    let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
    assert_eq!(dumpable, 0, "the host is dumpable after Executor::new");
    let host = std::process::id();
    let r = ex
        .execute(ExecPlan::new(format!(
            "cat /proc/{host}/environ >/dev/null; echo environ=$?; head -c 1 /proc/{host}/mem >/dev/null; \
             echo mem=$?; grep NoNewPrivs /proc/self/status"
        )))
        .await
        .unwrap();
    let text = &r.output.text;
    assert!(
        text.contains("environ=1"),
        "the host's environment was read: {text}"
    );
    assert!(
        text.contains("mem=1"),
        "the host's memory was opened: {text}"
    );
    assert_eq!(status_field(text, "NoNewPrivs"), "1", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_command_without_a_namespace_cannot_read_the_host() {
    let mut config = namespaced();
    config.pid_namespace = false;
    let ex = Executor::new(config).unwrap();
    the_host_stays_unreadable(&ex).await;
    ex.shutdown().await;
}

const AS_USER: &str = "SHELLWARD_TEST_AS_USER";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_user_s_command_cannot_read_the_host() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!("a_normal_user_s_command_cannot_read_the_host"),
        AS_USER,
    ) {
        return;
    }
    let ex = Executor::new(ExecutorConfig::default()).unwrap();
    the_host_stays_unreadable(&ex).await;
    ex.shutdown().await;
}

/// A token file and a directory of keys listed in `hidden_paths` read as empty inside, while the host still reads
/// them, cannot be changed (a write to the covering `/dev/null` is discarded), and a file beside them stays readable.
async fn secrets_are_hidden(config: ExecutorConfig) {
    let scratch = tempfile::tempdir().unwrap();
    let token = scratch.path().join("token");
    let keys = scratch.path().join("keys");
    let beside = scratch.path().join("beside");
    std::fs::write(&token, "TOKEN-VALUE-1234\n").unwrap();
    std::fs::create_dir(&keys).unwrap();
    std::fs::write(keys.join("key"), "KEY-VALUE-5678\n").unwrap();
    std::fs::write(&beside, "visible\n").unwrap();
    let mut config = config;
    config.hidden_paths = vec![token.clone(), keys.clone(), scratch.path().join("missing")];
    let ex = Executor::new(config).unwrap();
    assert!(ex.pid_namespaces(), "this test needs the session sandbox");
    let command = format!(
        "cat {t}; cat {k}/key; ls -A {k}; echo overwritten > {t}; rm -f {t}; cat {b}",
        t = token.display(),
        k = keys.display(),
        b = beside.display(),
    );
    let r = ex.execute(ExecPlan::new(command)).await.unwrap();
    let text = &r.output.text;
    assert!(!text.contains("TOKEN-VALUE"), "the token was read: {text}");
    assert!(!text.contains("KEY-VALUE"), "the key was read: {text}");
    assert!(
        text.contains("visible"),
        "the file beside was hidden too: {text}"
    );
    assert_eq!(
        std::fs::read_to_string(&token).unwrap(),
        "TOKEN-VALUE-1234\n"
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_s_secrets_cannot_be_read_inside() {
    secrets_are_hidden(namespaced()).await;
}

const HIDDEN_AS_USER: &str = "SHELLWARD_TEST_HIDDEN_AS_USER";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_user_s_command_cannot_read_the_host_s_secrets() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!(
            "a_normal_user_s_command_cannot_read_the_host_s_secrets"
        ),
        HIDDEN_AS_USER,
    ) {
        return;
    }
    secrets_are_hidden(ExecutorConfig::default()).await;
}
