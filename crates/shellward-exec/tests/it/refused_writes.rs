//! Refused writes seen by the sandbox itself (`ExecResult::refused_writes`): every kind of write outside the writable
//! paths — opening for writing, creating, truncating, making a directory, node or link, removing, renaming onto — is
//! recorded with its path (relative ones made absolute, links followed where the call follows them), also when the
//! command swallows the error; writes the confinement allows (the workspace, `/dev/null`, `/dev/stdout`) and calls
//! the kernel refuses before the confinement is asked (a missing directory, an existing one) are not. As root and
//! (rerun) as a normal user.

#![cfg(target_os = "linux")]

use crate::common::*;
use shellward_exec::{Confinement, ExecPlan, Executor, Network};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn plan(command: &str, mark: &str, work: &Path, network: Network) -> ExecPlan {
    let mut p = marked_plan(command, mark);
    p.confinement = Confinement::new(Some(vec![work.to_path_buf()]), network);
    p.workdir = Some(work.to_path_buf());
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_write_is_seen_with_its_path_and_no_allowed_one() {
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let work = open_dir();
    let outside = open_dir();
    let (w, o) = (work.path(), outside.path());
    std::fs::write(o.join("existing"), "x").unwrap();
    std::fs::set_permissions(
        o.join("existing"),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    std::fs::create_dir(o.join("dir")).unwrap();
    std::fs::write(w.join("mine"), "x").unwrap();
    std::os::unix::fs::symlink(o.join("existing"), w.join("link-out")).unwrap();
    let od = o.display();
    // Each command makes one refused write (and swallows the error); the path it is recorded with.
    let refused: Vec<(String, PathBuf)> = vec![
        (format!("echo x > {od}/new"), o.join("new")),
        (format!("echo x >> {od}/existing"), o.join("existing")),
        (format!("touch {od}/touched"), o.join("touched")),
        (format!("truncate -s 0 {od}/existing"), o.join("existing")),
        (format!("mkdir {od}/made"), o.join("made")),
        (format!("mkfifo {od}/fifo"), o.join("fifo")),
        (format!("ln -s x {od}/symlink"), o.join("symlink")),
        (format!("ln mine {od}/hardlink"), o.join("hardlink")),
        (format!("rm -f {od}/existing"), o.join("existing")),
        (format!("rmdir {od}/dir"), o.join("dir")),
        (format!("mv mine {od}/moved"), o.join("moved")),
        (format!("cd {od} && echo x > relative"), o.join("relative")),
        // Through a link in the workspace: where it leads is what was refused.
        ("echo x > link-out".to_string(), o.join("existing")),
        (
            format!("python3 -c \"import os; os.open('{od}/dir', os.O_TMPFILE | os.O_WRONLY)\""),
            o.join("dir"),
        ),
    ];
    for (command, path) in &refused {
        let r = ex
            .execute(plan(
                &format!("{{ {command}; }} 2>/dev/null; echo done"),
                &mark,
                w,
                Network::Host,
            ))
            .await
            .unwrap();
        assert_eq!(r.output.text, "done\n", "{command}: {r:?}");
        assert!(r.confinement.writes_watched, "{r:?}");
        assert_eq!(
            r.refused_writes,
            std::slice::from_ref(path),
            "{command}: {r:?}"
        );
    }
    assert!(
        o.join("existing").exists() && !o.join("new").exists(),
        "nothing outside was written"
    );
    // Allowed writes, reads, and calls the kernel refuses before the confinement: nothing recorded.
    for command in [
        "echo x > a && mkdir d && mv a d/b && ln -s b d/c && rm -r d && echo x > /dev/null && echo out > /dev/stdout"
            .to_string(),
        format!("cat {od}/existing > /dev/null; python3 -c \"open('{od}/existing').read()\""),
        format!("mkdir {od}/no/such 2>/dev/null; mkdir {od}/dir 2>/dev/null; echo out"),
        format!("echo x > {od}/dir 2>/dev/null; echo out"),
    ] {
        let r = ex
            .execute(plan(&command, &mark, w, Network::Host))
            .await
            .unwrap();
        assert!(r.refused_writes.is_empty(), "{command}: {r:?}");
        assert!(r.confinement.writes_watched, "{r:?}");
    }
    // With the broker's sockets too (a network other than the host's), from a thread, and at most eight kept.
    let many: String = (0..12)
        .map(|i| format!("echo x > {od}/many-{i}; "))
        .collect();
    let r = ex
        .execute(plan(
            &format!("{{ {many} }} 2>/dev/null; true"),
            &mark,
            w,
            Network::None,
        ))
        .await
        .unwrap();
    assert_eq!(r.refused_writes.len(), 8, "{r:?}");
    assert_eq!(r.refused_writes[0], o.join("many-0"));
    let threaded = format!(
        "python3 -c \"
import threading
def w():
    try: open('{od}/threaded', 'w')
    except OSError as e: print(type(e).__name__)
t = threading.Thread(target=w); t.start(); t.join()\""
    );
    let r = ex
        .execute(plan(&threaded, &mark, w, Network::Loopback))
        .await
        .unwrap();
    assert_eq!(r.output.text, "PermissionError\n", "{r:?}");
    assert_eq!(r.refused_writes, [o.join("threaded")], "{r:?}");
    // Writes anywhere: nothing to watch.
    let mut free = plan("echo x > a", &mark, w, Network::Host);
    free.confinement.writable = None;
    let r = ex.execute(free).await.unwrap();
    assert!(!r.confinement.writes_watched, "{r:?}");
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// A direct connect the command's network has no route for (`none`: nothing, not even loopback; `loopback`: anything
/// else) is recorded with its address; one merely refused by the peer (a closed port of its own loopback) is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_with_no_route_is_recorded_with_its_address() {
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let work = open_dir();
    let connect = |to: &str| {
        format!(
            "python3 -c \"
import socket
for host, port in [{to}]:
    try: socket.create_connection((host, port), 2)
    except OSError: print('failed')
\""
        )
    };
    for (network, want) in [
        (Network::None, &["203.0.113.7:443", "127.0.0.1:1"][..]),
        (Network::Loopback, &["203.0.113.7:443"][..]),
    ] {
        let r = ex
            .execute(plan(
                &connect("('203.0.113.7', 443), ('127.0.0.1', 1)"),
                &mark,
                work.path(),
                network,
            ))
            .await
            .unwrap();
        assert_eq!(r.output.text, "failed\n".repeat(2), "{r:?}");
        assert_eq!(r.refused_network, want, "{network:?}: {r:?}");
        assert!(r.refused_writes.is_empty(), "{r:?}");
    }
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the session sandbox in a user namespace of its own).
    every_refused_write_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_REFUSED_WRITES_AS_USER"
);
