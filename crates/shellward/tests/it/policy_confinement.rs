//! What a command may touch, decided per command by the policies (contract 0.3) within the operator's ceiling, and
//! enforced by the host: the default policy's strict profile takes the network away except from the commands it
//! names, a policy that widens past the ceiling is refused (naming it and the ceiling), and an allow-list (the
//! operator's or a policy's) reaches only its names, through the executor's filtering proxy.

// Unix only: these tests prove what the facade does on Linux (`/proc` scans, signals, sandboxes); the executor's
// `portable.rs` and the CLI's Windows tests cover what every platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward::{Config, Shellward};

/// A listener on loopback and a command that reaches it, as a script (so a pattern can name it) and inline.
struct Target {
    _listener: std::net::TcpListener,
    script: String,
    inline: String,
}

fn target(dir: &std::path::Path) -> Target {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('reached')"
    );
    std::fs::write(dir.join("reach.py"), &code).unwrap();
    Target {
        _listener: listener,
        script: format!("python3 {}/reach.py", dir.display()),
        inline: format!("python3 -c \"{code}\""),
    }
}

fn build(dir: &std::path::Path, mark: &str, confinement: &str, policies: &str) -> Shellward {
    let file = dir.join("shellward.toml");
    std::fs::write(
        &file,
        format!(
            "{policies}\n[confinement]\n{confinement}\n[executor]\nworkdir = \"{}\"\ngrace = \"300ms\"\n\
             [env.set]\n{MARK} = \"{mark}\"\n",
            dir.display()
        ),
    )
    .unwrap();
    Shellward::builder()
        .config(Config::load(&file).expect("config"))
        .build()
        .expect("build")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_strict_profile_cuts_the_network_except_for_the_commands_it_names() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let policies = format!(
        "[[policy]]\nbuiltin = \"default\"\nsettings = {{ profile = \"strict\", network_exceptions = [\"python3 {}/reach.py\"] }}\n\
         [[policy]]\nbuiltin = \"guard\"\n",
        dir.path().display()
    );
    let sw = build(dir.path(), &mark, "network = \"host\"", &policies);
    let r = run(&sw, exec(&t.inline)).await;
    assert!(!r.success && !r.output.contains("reached"), "{r:?}");
    assert!(confinement_says(&r, "network none"), "{r:?}");
    let r = run(&sw, exec(&t.script)).await;
    assert!(r.success && r.output.contains("reached"), "{r:?}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_may_widen_only_within_the_ceiling() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let widen = "[[policy]]\nbuiltin = \"default\"\nsettings = { network = \"host\" }\n";
    // The ceiling defaults to the defaults: giving the host's network to a command is the policy's fault.
    let sw = build(dir.path(), &mark, "network = \"none\"", widen);
    let r = run(&sw, exec(&t.inline)).await;
    assert!(!r.success && !r.output.contains("reached"), "{r:?}");
    let reason = r.deny_reason.clone().expect("denied");
    assert!(
        reason.contains("default") && reason.contains("max_network"),
        "{reason}"
    );
    sw.shutdown().await;
    // Raised by the operator, the same plan runs and reaches the listener.
    let sw = build(
        dir.path(),
        &mark,
        "network = \"none\"\nmax_network = \"host\"",
        widen,
    );
    let r = run(&sw, exec(&t.inline)).await;
    assert!(r.success && r.output.contains("reached"), "{r:?}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A small HTTP server on the host's loopback answering `hello`; its port.
fn http_server() -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let _ = s.read(&mut [0u8; 2048]);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allow_list_reaches_only_its_names_through_the_proxy_and_the_model_is_told() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let port = http_server();
    let confinement = "network = { allow = [\"allowed.test\"] }\n\
                       proxy_hosts = { \"allowed.test\" = \"127.0.0.1\", \"other.test\" = \"127.0.0.1\" }";
    let sw = build(dir.path(), &mark, confinement, "");
    let get = |host: &str| {
        exec(&format!(
            "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://{host}:{port}/', timeout=5).read().decode())\""
        ))
    };
    let r = run(&sw, get("allowed.test")).await;
    assert!(r.success && r.output.contains("hello"), "{r:?}");
    assert!(
        confinement_says(&r, "network only to allowed.test"),
        "{r:?}"
    );
    let r = run(&sw, get("other.test")).await;
    assert!(!r.success && r.output.contains("403"), "{r:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("may reach only allowed.test")
                && n.contains(&format!("other.test:{port}"))),
        "{:?}",
        r.notes
    );
    // Seen by the proxy itself: said also when the program swallows the refusal; once.
    let swallowed = format!(
        "python3 -c \"
import urllib.request
try: urllib.request.urlopen('http://other.test:{port}/', timeout=5)
except Exception: pass\""
    );
    let r = run(&sw, exec(&swallowed)).await;
    assert!(r.success, "{r:?}");
    let said: Vec<&shellward::Note> = r
        .notes
        .iter()
        .filter(|n| n.contains(&format!("other.test:{port}")))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", r.notes);
    assert_eq!(
        said[0].kind(),
        shellward::NoteKind::Refused(shellward::Refusal::Network)
    );
    sw.shutdown().await;
    // A policy may choose an allow-list for one command (here the scripted test policy, `net:allow=…`), within the
    // ceiling; the next command has the operator's network again.
    let scripted = shellward_policy::embedded::guests::SCRIPTED_POLICY;
    let policies = format!("[[policy]]\npath = \"{scripted}\"\n");
    let sw = build(dir.path(), &mark, "network = \"host\"", &policies);
    let r = sw
        .without_session()
        .execute(
            exec("net:allow=pypi.org,*.npmjs.org:443"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.success, "{r:?}");
    assert!(confinement_says(&r, "pypi.org, *.npmjs.org:443"), "{r:?}");
    let r = run(&sw, exec("true")).await;
    assert!(
        r.confinement
            .as_deref()
            .is_none_or(|l| !l.contains("network")),
        "{r:?}"
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A policy sets how long a background start waits for readiness (contract 0.3's `startup-wait-ms`): the default
/// policy's `promoted_startup_wait` holds a promoted watcher's start for that long, while other background starts keep
/// the operator's `[tools] startup_wait`.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_sets_the_start_up_wait_of_the_commands_it_promotes() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let policies = "[[policy]]\nbuiltin = \"default\"\nsettings = { promoted_startup_wait = \"1500ms\" }\n\
                    [tools]\nstartup_wait = \"100ms\"\n";
    let sw = build(dir.path(), &mark, "network = \"host\"", policies);
    let started = std::time::Instant::now();
    let r = run(&sw, exec("tail -f /dev/null")).await;
    let promoted = started.elapsed();
    assert!(r.running, "{r:?}");
    assert!(
        promoted >= std::time::Duration::from_millis(1400),
        "the policy's wait: {promoted:?}"
    );
    let started = std::time::Instant::now();
    let r = run(&sw, exec("sleep 30").background(true)).await;
    let plain = started.elapsed();
    assert!(r.running, "{r:?}");
    assert!(
        plain < promoted,
        "the operator's shorter wait: {plain:?} vs {promoted:?}"
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// What the policies are told about where a command runs: the platform, the configured shell, the operator's
/// confinement and ceiling, and the paths no command can read.
#[tokio::test(flavor = "multi_thread")]
async fn the_request_tells_policies_the_shell_the_confinement_and_the_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "x").unwrap();
    let file = dir.path().join("shellward.toml");
    std::fs::write(
        &file,
        format!(
            "[executor]\nshell = [\"bash\", \"-c\"]\nworkdir = \"{}\"\n[confinement]\nnetwork = \"loopback\"\n\
             max_network = \"host\"\nwritable = [\"$WORKDIR\"]\ndeny_read = [\"{}\"]\n",
            dir.path().display(),
            secret.display()
        ),
    )
    .unwrap();
    let sw = Shellward::builder()
        .config(Config::load(&file).unwrap())
        .build()
        .unwrap();
    let d = sw.without_session().decide(&exec("ls"), &[], &[]).unwrap();
    assert_eq!(d.request.shell, "bash");
    assert_eq!(d.request.os, std::env::consts::OS);
    assert_eq!(
        d.request.confinement.network,
        shellward_policy::Network::Loopback
    );
    assert_eq!(
        d.request.confinement.writable,
        Some(vec![dir.path().display().to_string()]),
        "the cd trap's private directory is host machinery, not shown"
    );
    assert_eq!(d.request.ceiling.network, shellward_policy::Network::Host);
    assert_eq!(d.request.hidden, vec![secret.display().to_string()]);
    sw.shutdown().await;
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the session sandbox in a user namespace of its own, a network namespace
    /// per confined command).
    every_policy_confinement_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_POLICY_CONFINEMENT_AS_USER"
);

/// The default writable paths keep ordinary installs working — `cargo install`, `go install`, `pip install --user`,
/// `uv tool`, Maven's and Gradle's caches, ccache — while a shell's startup files, rustup's toolchains, Maven's
/// settings and the rest of the home stay read-only. (The defaults' home entries mapped onto a scratch home that looks
/// like a developer's, with the working directory the only other writable path; needs Landlock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_writable_paths_cover_installs_and_not_startup_files() {
    if shellward::exec::Executor::landlock_abi() < 1 {
        eprintln!("skipped: this kernel has no Landlock, so writes are not confined");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let mapped: Vec<String> = shellward::DEFAULT_WRITABLE
        .iter()
        .filter_map(|p| p.strip_prefix("~/"))
        .map(|rest| {
            let dir = home.join(rest);
            std::fs::create_dir_all(&dir).unwrap();
            dir.display().to_string()
        })
        .collect();
    for dir in [".rustup/toolchains", ".config", ".m2"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    let mut config = Config::default();
    config.executor.grace = std::time::Duration::from_millis(300);
    config.executor.env.set_var(MARK, &mark);
    config.executor.default_workdir = Some(work.path().to_path_buf());
    config.confinement.writable = Some(
        std::iter::once("$WORKDIR".to_string())
            .chain(mapped)
            .collect(),
    );
    let sw = Shellward::builder().config(config).build().expect("build");
    let at = sw.without_session();
    let run = |command: String| {
        let at = at.clone();
        async move {
            at.execute(exec(&command), ExecuteOptions::new())
                .await
                .unwrap()
        }
    };
    let touch = |path: &str| run(format!("echo x > '{}'", home.join(path).display()));
    for installed in [
        ".cargo/bin/ripgrep",
        ".cargo/registry/index",
        "go/bin/gopls",
        ".local/bin/black",
        ".local/lib/site.pth",
        ".local/share/uv/tool",
        ".m2/repository/junit.jar",
        ".gradle/caches/x",
        ".cache/pip-x",
        ".ccache/x",
    ] {
        let r = touch(installed).await;
        assert_eq!(r.exit_code, Some(0), "{installed} is not writable: {r:?}");
    }
    for kept in [
        ".bashrc",
        ".profile",
        ".rustup/toolchains/evil",
        ".m2/settings.xml",
        ".config/autostart",
    ] {
        let r = touch(kept).await;
        assert_ne!(r.exit_code, Some(0), "{kept} was writable: {r:?}");
        assert!(!home.join(kept).exists(), "{kept} was written");
        // The agent is told what was refused (the home may be shown as `~`), by which rule, and what to do.
        let name = home.file_name().unwrap().to_string_lossy().to_string();
        let path = format!("{name}/{kept}");
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains(&path) && n.contains("[confinement] writable")),
            "{kept}: {:?}",
            r.notes
        );
        // Seen by the sandbox itself: said also when the command swallows the error and succeeds.
        let r = run(format!(
            "{{ echo x > '{}'; }} 2>/dev/null; true",
            home.join(kept).display()
        ))
        .await;
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        let said: Vec<&shellward::Note> = r
            .notes
            .iter()
            .filter(|n| n.contains("[confinement] writable"))
            .collect();
        assert!(
            said.len() == 1 && said[0].contains(&path),
            "{kept}, swallowed: {:?}",
            r.notes
        );
        // A host reads what it is about from its kind, not from its English.
        assert_eq!(
            said[0].kind(),
            shellward::NoteKind::Refused(shellward::Refusal::Write)
        );
    }
    // A failing command that merely prints "Permission denied" with a path is not blamed on the sandbox, which saw
    // no refused write (nothing is guessed from the output).
    let r = run("echo \"cat: /etc/shadow-x: Permission denied\"; exit 1".into()).await;
    assert!(
        !r.notes.iter().any(|n| n.contains("[confinement] writable")),
        "{:?}",
        r.notes
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// Under a network other than the host's a command's own Unix sockets work (made and connected in its working
/// directory), a host socket is refused and the agent is told which one, by which rule, and what to do — from the
/// refusal the sandbox saw, also when the program swallowed the error — and a host socket the operator names in
/// `[confinement] unix_sockets` is reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_unix_socket_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let serve = |path: std::path::PathBuf| {
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                use std::io::Write;
                let _ = c.write_all(b"host-answered");
            }
        });
    };
    let (host, named) = (dir.path().join("host.sock"), dir.path().join("agent.sock"));
    serve(host.clone());
    serve(named.clone());
    let audit = dir.path().join("audit.jsonl");
    let sw = build(
        dir.path(),
        &mark,
        &format!(
            "network = \"none\"\nunix_sockets = [\"{}\"]",
            named.display()
        ),
        &format!("[audit]\npath = \"{}\"\n", audit.display()),
    );
    let run = |command: String| {
        let sw = &sw;
        async move {
            sw.without_session()
                .execute(exec(&command), ExecuteOptions::new())
                .await
                .unwrap()
        }
    };
    let own = "python3 -c \"
import socket, threading
s = socket.socket(socket.AF_UNIX); s.bind('own.sock'); s.listen()
threading.Thread(target=lambda: s.accept()[0].sendall(b'own-answered')).start()
c = socket.socket(socket.AF_UNIX); c.connect('own.sock'); print(c.recv(20).decode())
\"";
    let r = run(own.into()).await;
    assert_eq!(r.output, "own-answered\n", "{r:?}");
    assert!(!r.notes.iter().any(|n| n.contains("Unix socket")), "{r:?}");
    let connect = |path: &std::path::Path, swallow: bool| {
        format!(
            "python3 -c \"
import socket, sys
c = socket.socket(socket.AF_UNIX)
try:
    c.connect('{}'); print(c.recv(20).decode())
except OSError as e:
    print(type(e).__name__); sys.exit({})
\"",
            path.display(),
            if swallow { 0 } else { 1 }
        )
    };
    for swallow in [false, true] {
        let r = run(connect(&host, swallow)).await;
        assert_eq!(r.output, "PermissionError\n", "{r:?}");
        let note = r
            .notes
            .iter()
            .find(|n| n.contains("Unix socket"))
            .unwrap_or_else(|| panic!("{:?}", r.notes));
        assert!(
            note.contains("host.sock")
                && note.contains("network = \"none\"")
                && note.contains("network = \"host\""),
            "{note}"
        );
    }
    let r = run(connect(&named, false)).await;
    assert_eq!(r.output, "host-answered\n", "{r:?}");
    // A datagram socket (which could send to any path) is refused, and said from what the sandbox saw.
    let r = run("python3 -c \"
import socket
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
except OSError as e:
    print(type(e).__name__)
\""
    .into())
    .await;
    assert_eq!(r.output, "PermissionError\n", "{r:?}");
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("datagram Unix socket"))
        .unwrap_or_else(|| panic!("{:?}", r.notes));
    assert!(
        note.contains("SOCK_STREAM") && note.contains("network = \"host\""),
        "{note}"
    );
    sw.shutdown().await;
    // Audited: each end record says which sockets the sandbox refused.
    let refused: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["type"] == "end")
        .filter_map(|r| r.get("refused_sockets").cloned())
        .collect();
    assert_eq!(
        refused,
        vec![serde_json::json!([host.clone()]); 2],
        "the two refused connects"
    );
    let datagrams = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"refused_unix_datagram\":true"))
        .count();
    assert_eq!(datagrams, 1, "the refused datagram socket is audited");
    assert!(survivors(&mark).is_empty());
}

/// Under `network = "none"` a connect and a name lookup are named to the agent from what the sandbox saw — which
/// address, the rule, what to ask for — also when the program swallows the error; once per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_destination_is_named_from_what_the_sandbox_saw() {
    if !shellward::exec::Executor::unix_socket_broker() {
        eprintln!("skipped: no socket broker here (it sees the refused connects)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mark = new_mark();
    let sw = build(dir.path(), &mark, "network = \"none\"", "");
    let r = sw
        .without_session()
        .execute(
            exec(
                "python3 -c \"
import socket
for to in [('203.0.113.7', 443), ('203.0.113.8', 80)]:
    try: socket.create_connection(to, 2)
    except OSError: pass
try: socket.getaddrinfo('example.com', 443)
except OSError: pass
print('done')\"",
            ),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.success && r.output == "done\n", "{r:?}");
    let said: Vec<&shellward::Note> = r
        .notes
        .iter()
        .filter(|n| n.contains("network = \"none\""))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", r.notes);
    let note = said[0];
    assert_eq!(
        note.kind(),
        shellward::NoteKind::Refused(shellward::Refusal::Network)
    );
    assert!(
        note.contains("203.0.113.7:443")
            && note.contains("203.0.113.8:80")
            && note.contains("no network at all")
            && note.contains("network = \"host\""),
        "{note}"
    );
    let resolver = std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim_start().starts_with("nameserver"));
    if resolver {
        assert!(note.contains(":53 (a name server"), "{note}");
    }
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}
