//! Tests of the `clone3` spawn path: exit codes, program lookup and its cache, descriptors, failures reported.

use super::*;
use std::os::unix::fs::PermissionsExt;

/// No init, no limits, no hardening beyond `no_new_privs`.
fn plain() -> Around<'static> {
    static NONE: std::sync::LazyLock<super::super::child_setup::Hardening> =
        std::sync::LazyLock::new(super::super::child_setup::Hardening::none);
    Around::only(&NONE)
}

fn program(dir: &std::path::Path, code: i32) {
    let p = dir.join("shellward-test-prog");
    std::fs::write(&p, format!("#!/bin/sh\nexit {code}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn run(spec: &crate::sys::SpawnSpec, cache: &SpawnCache) -> io::Result<i32> {
    let null = std::fs::File::options().write(true).open("/dev/null")?;
    use std::os::fd::AsRawFd;
    // A test in another thread may fork while a script is being written here; its child holds the write
    // descriptor until it execs, and exec then fails with ETXTBSY for that moment.
    let mut attempts = 0;
    let (pid, _pidfd) = loop {
        match spawn_spec(
            spec,
            None,
            null.as_raw_fd(),
            null.as_raw_fd(),
            None,
            cache,
            &plain(),
        ) {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => break other?,
        }
    };
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(libc::WEXITSTATUS(status))
}

/// A command starts with the default disposition of the signals this process ignores (a host started with `&`
/// by a non-interactive shell ignores SIGINT and SIGQUIT; `nohup` ignores SIGHUP).
#[test]
fn signals_the_host_ignores_are_not_ignored_by_the_command() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let ignored = [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP];
    // SAFETY: setting and restoring dispositions of signals nothing in this test binary relies on receiving.
    let saved: Vec<libc::sighandler_t> = ignored
        .iter()
        .map(|&sig| unsafe { libc::signal(sig, libc::SIG_IGN) })
        .collect();
    let (mut read, write) = std::io::pipe().unwrap();
    let spec = test_spec(
        "/bin/sh",
        vec!["-c".into(), "grep '^SigIgn' /proc/self/status".into()],
        vec![],
    );
    let spawned = spawn_spec(
        &spec,
        None,
        write.as_raw_fd(),
        write.as_raw_fd(),
        None,
        &SpawnCache::default(),
        &plain(),
    );
    for (&sig, &old) in ignored.iter().zip(&saved) {
        // SAFETY: restores what was saved above.
        unsafe { libc::signal(sig, old) };
    }
    let (pid, _pidfd) = spawned.unwrap();
    drop(write);
    let mut out = String::new();
    read.read_to_string(&mut out).unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let mask = out
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line: {out:?}"));
    for sig in ignored {
        assert_eq!(
            mask & (1 << (sig - 1)),
            0,
            "signal {sig} is ignored by the command: {out:?}"
        );
    }
}

#[test]
fn the_resolved_program_is_reused_and_looked_up_again_when_it_moves_or_path_changes() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let path = std::env::join_paths([a.path(), b.path()]).unwrap();
    let spec = |path: &std::ffi::OsStr| {
        test_spec(
            "shellward-test-prog",
            vec![],
            vec![("PATH".into(), path.to_owned())],
        )
    };
    let cache = SpawnCache::default();
    program(a.path(), 3);
    program(b.path(), 4);
    assert_eq!(run(&spec(&path), &cache).unwrap(), 3);
    assert!(
        cache
            .resolve("shellward-test-prog".as_ref(), Some(&path))
            .unwrap()
            .1,
        "cached"
    );
    // The cached program disappears: the spawn looks it up again and finds the next one on PATH.
    std::fs::remove_file(a.path().join("shellward-test-prog")).unwrap();
    assert_eq!(run(&spec(&path), &cache).unwrap(), 4);
    // A different PATH is a different lookup.
    program(a.path(), 5);
    let only_a = std::env::join_paths([a.path()]).unwrap();
    assert_eq!(run(&spec(&only_a), &cache).unwrap(), 5);
    // Nowhere on PATH: a clear error, not a stale path.
    let empty = tempfile::tempdir().unwrap();
    let err = run(&spec(empty.path().as_os_str()), &cache).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("not found on PATH"), "{err}");
}

/// A spec of `program` with `args` and exactly the variables `env`, in the temporary directory, no session.
fn test_spec(
    program: &str,
    args: Vec<std::ffi::OsString>,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> crate::sys::SpawnSpec {
    crate::sys::SpawnSpec {
        program: program.into(),
        args,
        workdir: std::env::temp_dir(),
        env: super::super::SpawnEnv::new(Default::default(), env),
        separate_stderr: false,
        name: "t".into(),
        stdin: Default::default(),
        session: None,
        log_dir: std::env::temp_dir(),
        confinement: Default::default(),
        preview: None,
    }
}
