//! A session's own Unix sockets under a network other than the host's (`none`, `loopback`, `allow`): a socket a
//! command makes in its writable paths or its private `/tmp` connects — in one command, across the session's commands
//! (Python's forkserver, a server started in the background) — while every host socket stays cut, whatever path
//! leads to it (its own, a symbolic or hard link in the workspace, the abstract namespace), datagram sockets stay
//! refused, and each refused path is recorded for the command's result. As root and (rerun) as a normal user.

#![cfg(target_os = "linux")]

use crate::common::*;
use shellward_exec::{Confinement, ExecPlan, Executor, Network, Session};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn plan(command: &str, mark: &str, dir: &Path, network: Network) -> ExecPlan {
    let mut p = marked_plan(command, mark);
    p.confinement = Confinement::new(Some(vec![dir.to_path_buf()]), network);
    p.confinement.allow = if network == Network::Allow {
        vec!["example.invalid".into()]
    } else {
        Vec::new()
    };
    p.workdir = Some(dir.to_path_buf());
    p.session = Some("own-sockets".into());
    p
}

/// Whether a C compiler is here (the tests that need a thread, a signal or an odd address write their program in C);
/// says so when it is not.
fn have_cc() -> bool {
    let here = std::process::Command::new("cc")
        .arg("--version")
        .output()
        .is_ok();
    if !here {
        eprintln!("skipped: no C compiler here");
    }
    here
}

/// Compiles `source` into `dir/name` (with threads).
fn compile_c(dir: &Path, name: &str, source: &str) {
    let file = dir.join(format!("{name}.c"));
    std::fs::write(&file, source).unwrap();
    let built = std::process::Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(dir.join(name))
        .arg(&file)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
}

/// A host server at `path` answering `host-answered` (and the same on the abstract name `abstract_name`).
fn host_server(path: &Path, abstract_name: &str) {
    use std::os::linux::net::SocketAddrExt;
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    for l in [listener, abstract_listener] {
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                use std::io::Write;
                let _ = s.write_all(b"host-answered");
            }
        });
    }
}

/// Python: connect to `target` (a path, or `@name` for the abstract namespace) and print what it says, or the
/// error's class.
fn client(target: &str) -> String {
    let addr = match target.strip_prefix('@') {
        Some(name) => format!("'\\0{name}'"),
        None => format!("'{target}'"),
    };
    format!(
        "python3 -c \"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({addr}); print(s.recv(100).decode())
except OSError as e:
    print(type(e).__name__)
\""
    )
}

const ONE_COMMAND: &str = "python3 -c \"
import socket, threading
s = socket.socket(socket.AF_UNIX); s.bind('own.sock'); s.listen()
def serve():
    c, _ = s.accept(); c.sendall(b'own-answered'); c.close()
threading.Thread(target=serve).start()
c = socket.socket(socket.AF_UNIX); c.connect('own.sock'); print(c.recv(100).decode())
\"";

/// The client connects from a thread that is not the main one (the broker answers the calling thread).
const FROM_A_THREAD: &str = "python3 -c \"
import socket, threading
s = socket.socket(socket.AF_UNIX); s.bind('threaded.sock'); s.listen()
def client():
    c = socket.socket(socket.AF_UNIX); c.connect('threaded.sock'); print(c.recv(100).decode())
t = threading.Thread(target=client); t.start()
s.accept()[0].sendall(b'thread-answered'); t.join()
\"";

/// The client made itself non-dumpable first, as ssh and ssh-agent do (the broker still reads its call).
const NOT_DUMPABLE: &str = "python3 -c \"
import ctypes, socket, threading
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
s = socket.socket(socket.AF_UNIX); s.bind('nd.sock'); s.listen()
threading.Thread(target=lambda: s.accept()[0].sendall(b'nd-answered')).start()
c = socket.socket(socket.AF_UNIX); c.connect('nd.sock'); print(c.recv(100).decode())
\"";

const IN_TMP: &str = "python3 -c \"
import socket, threading, tempfile, os
p = os.path.join(tempfile.mkdtemp(), 's')
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen()
threading.Thread(target=lambda: s.accept()[0].sendall(b'tmp-answered')).start()
c = socket.socket(socket.AF_UNIX); c.connect(p); print(c.recv(100).decode())
\"";

const FORKSERVER: &str = "python3 -c \"
import multiprocessing as m
if __name__ == '__main__':
    m.set_start_method('forkserver'); print(m.Pool(1).apply(abs, (-3,)))
\"";

const DATAGRAMS: &str = "python3 -c \"
import socket
for make in (lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),
             lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)):
    try:
        make(); print('made')
    except OSError as e:
        print(type(e).__name__)
a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())
\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_own_unix_sockets_connect_and_the_hosts_stay_cut() {
    let ex = Executor::new(namespaced()).unwrap();
    let host_dir = open_dir();
    let host_sock = host_dir.path().join("docker.sock");
    let mark = new_mark();
    let abstract_name = format!("shellward-host-{mark}");
    host_server(&host_sock, &abstract_name);
    for network in [Network::None, Network::Loopback, Network::Allow] {
        let work = open_dir();
        // The host's socket reached through the workspace: a symbolic link, and a hard link of the socket itself.
        std::os::unix::fs::symlink(&host_sock, work.path().join("via-symlink.sock")).unwrap();
        let hard = std::fs::hard_link(&host_sock, work.path().join("via-hardlink.sock")).is_ok();
        let run = |command: String| {
            let (ex, p) = (&ex, plan(&command, &mark, work.path(), network));
            async move { ex.execute(p).await.unwrap() }
        };
        for (command, want) in [
            (ONE_COMMAND.to_string(), "own-answered\n"),
            (IN_TMP.to_string(), "tmp-answered\n"),
            (FROM_A_THREAD.to_string(), "thread-answered\n"),
            (NOT_DUMPABLE.to_string(), "nd-answered\n"),
            (FORKSERVER.to_string(), "3\n"),
            (
                DATAGRAMS.to_string(),
                "PermissionError\nPermissionError\npair\n",
            ),
        ] {
            let r = run(command.clone()).await;
            assert_eq!(r.output.text, want, "{network:?} {command}: {r:?}");
            // The sandbox saw the datagram refusals itself; nothing else was refused.
            assert_eq!(
                r.refused_unix_datagram,
                command == DATAGRAMS,
                "{network:?} {command}: {r:?}"
            );
            assert!(r.refused_sockets.is_empty(), "{r:?}");
        }
        let mut host_paths = vec![host_sock.clone(), work.path().join("via-symlink.sock")];
        if hard {
            host_paths.push(work.path().join("via-hardlink.sock"));
        }
        for target in &host_paths {
            let r = run(client(&target.display().to_string())).await;
            assert_eq!(
                r.output.text,
                "PermissionError\n",
                "{network:?} {}: {r:?}",
                target.display()
            );
            assert!(
                r.refused_sockets.contains(target),
                "{network:?}: the refusal is recorded: {r:?}"
            );
        }
        // The abstract namespace is the command's network namespace's: the host's name is not there.
        let r = run(client(&format!("@{abstract_name}"))).await;
        assert_eq!(
            r.output.text, "ConnectionRefusedError\n",
            "{network:?}: {r:?}"
        );
        // A relative path naming a host socket is resolved as the command sees it, and refused.
        let r = run(client("via-symlink.sock")).await;
        assert_eq!(r.output.text, "PermissionError\n", "{network:?}: {r:?}");
        if network == Network::Loopback {
            across_commands(&ex, &mark, work.path()).await;
        }
    }
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// A host socket the operator names (`Confinement::unix_sockets`, e.g. an ssh-agent's) is reached under every network
/// that cuts the others — by its path or a link to it — while a host socket beside it stays cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_socket_the_operator_names_is_reached_and_no_other() {
    let ex = Executor::new(namespaced()).unwrap();
    let host_dir = open_dir();
    let mark = new_mark();
    let (named, other) = (
        host_dir.path().join("agent.sock"),
        host_dir.path().join("other.sock"),
    );
    host_server(&named, &format!("shellward-named-{mark}"));
    host_server(&other, &format!("shellward-other-{mark}"));
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&named, work.path().join("agent-link")).unwrap();
    for network in [Network::None, Network::Loopback, Network::Allow] {
        let run = |target: String| {
            let mut p = plan(&client(&target), &mark, work.path(), network);
            p.confinement.unix_sockets = vec![named.clone()];
            let ex = &ex;
            async move { ex.execute(p).await.unwrap() }
        };
        for target in [named.display().to_string(), "agent-link".into()] {
            let r = run(target.clone()).await;
            assert_eq!(
                r.output.text, "host-answered\n",
                "{network:?} {target}: {r:?}"
            );
            assert!(r.refused_sockets.is_empty(), "{r:?}");
        }
        let r = run(other.display().to_string()).await;
        assert_eq!(r.output.text, "PermissionError\n", "{network:?}: {r:?}");
        assert_eq!(r.refused_sockets, vec![other.clone()], "{r:?}");
    }
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// A command racing the check: one thread flips the address a connect names between its own socket and the host's,
/// byte for byte, while another connects 2,000 times. The broker connects the address it copied and checked, never
/// what the memory says later, so the host's socket never answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_flipped_during_the_check_never_reaches_the_host() {
    if !have_cc() {
        return;
    }
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let host_dir = tempfile::tempdir().unwrap();
    let work = open_dir();
    // Whole addresses are copied, each held for a moment: a mix of the two names no socket.
    let own = work.path().join("o.sock");
    let host = host_dir.path().join("h.sock");
    let (own_s, host_s) = (own.display().to_string(), host.display().to_string());
    std::fs::set_permissions(
        host_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    host_server(&host, &format!("shellward-race-{mark}"));
    compile_c(work.path(), "race", RACE_C);
    let command = format!("./race '{own_s}' '{host_s}'");
    let r = ex
        .execute(plan(&command, &mark, work.path(), Network::Loopback))
        .await
        .unwrap();
    let text = r.output.text.clone();
    assert!(text.contains("host 0\n"), "{r:?}");
    let own_count: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("own "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(own_count > 0, "some connects named its own socket: {r:?}");
    assert_eq!(
        r.refused_sockets,
        vec![host.clone()],
        "and some the host's: {r:?}"
    );
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// The racing command of [`an_address_flipped_during_the_check_never_reaches_the_host`]: `race OWN HOST`.
const RACE_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
static struct sockaddr_un shared, a, b;
static volatile int stop;
static void *flip(void *x) {
    (void)x;
    /* Each address held for a moment (a spin, not a sleep: the flip must land inside the check's window too). */
    while (!stop) {
        memcpy(&shared, &a, sizeof a);
        __asm__ volatile("" ::: "memory");
        for (volatile int i = 0; i < 2000; i++) {}
        memcpy(&shared, &b, sizeof b);
        __asm__ volatile("" ::: "memory");
        for (volatile int i = 0; i < 2000; i++) {}
    }
    return 0;
}
static void *serve(void *x) {
    int l = *(int *)x;
    for (;;) { int c = accept(l, 0, 0); if (c < 0) return 0; write(c, "own-answered", 12); close(c); }
}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    a.sun_family = b.sun_family = AF_UNIX;
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    strncpy(b.sun_path, argv[2], sizeof b.sun_path - 1);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    unlink(argv[1]);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 64)) { perror("own"); return 3; }
    pthread_t f, s;
    pthread_create(&s, 0, serve, &l);
    pthread_create(&f, 0, flip, 0);
    int own = 0, host = 0;
    for (int i = 0; i < 2000; i++) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&shared, sizeof shared) == 0) {
            struct timeval tv = {2, 0};
            setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            char buf[32] = {0};
            read(c, buf, sizeof buf - 1);
            if (strstr(buf, "host")) host++;
            if (strstr(buf, "own")) own++;
        }
        close(c);
    }
    stop = 1;
    pthread_join(f, 0);
    printf("own %d\nhost %d\n", own, host);
    return 0;
}
"#;

/// A command that opens hundreds of connects that never complete (its own listener, which never accepts) holds up
/// only itself: the broker answers at most a bounded number at once (a thread each), and they all end with the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_blocked_connects_is_bounded_and_ends_with_the_command() {
    // The broker's answering threads of this process (other tests' brokers may add a few).
    let threads = || -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "sw-unix-answer")
            })
            .count()
    };
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let work = open_dir();
    // Warm the session (its sandbox, the spawner) so the count below is the flood's.
    ex.execute(plan("true", &mark, work.path(), Network::Loopback))
        .await
        .unwrap();
    let flood = "python3 -c \"
import socket, threading, time
l = socket.socket(socket.AF_UNIX); l.bind('never.sock'); l.listen(0)
def hang():
    try:
        socket.socket(socket.AF_UNIX).connect('never.sock')
    except OSError:
        pass
for _ in range(300):
    threading.Thread(target=hang, daemon=True).start()
print('flooding', flush=True)
time.sleep(60)
\"";
    let mut p = plan(flood, &mark, work.path(), Network::Loopback);
    p.background = true;
    let started = ex.execute(p).await.unwrap();
    let session = Session::from("own-sockets");
    wait_for_output_in(&ex, &started.id, Some(&session), "flooding").await;
    let mut most = 0;
    for _ in 0..20 {
        most = most.max(threads());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        (20..=40).contains(&most),
        "{most} answering threads during the flood: the broker's answers are not bounded to 32"
    );
    ex.signal(
        Some(&session),
        &started.id,
        shellward_exec::SignalKind::Kill,
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while threads() > 4 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        threads() <= 4,
        "{} answering threads after the command ended",
        threads()
    );
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// Connects while a timer signal whose handler restarts system calls (`SA_RESTART`) fires every 20 µs: a connect the
/// broker has already made is never restarted and made again (which would fail with `EISCONN`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_under_a_restarting_signal_is_made_once() {
    if !have_cc() {
        return;
    }
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let work = open_dir();
    compile_c(work.path(), "signalled", SIGNALLED_C);
    let r = ex
        .execute(plan("./signalled", &mark, work.path(), Network::Loopback))
        .await
        .unwrap();
    assert_eq!(r.output.text, "failed 0\n", "{r:?}");
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// The program of [`a_connect_under_a_restarting_signal_is_made_once`].
const SIGNALLED_C: &str = r#"#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
static int l;
static void on_alarm(int s) { (void)s; }
static void *serve(void *x) { (void)x; for (;;) { int c = accept(l, 0, 0); if (c < 0) return 0; close(c); } }
int main(void) {
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, "signalled.sock");
    unlink(a.sun_path);
    l = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 512)) { perror("listen"); return 3; }
    pthread_t t;
    pthread_create(&t, 0, serve, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval it = {{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &it, 0);
    int failed = 0;
    for (int i = 0; i < 1500; i++) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) { failed++; if (failed < 3) perror("connect"); }
        close(c);
    }
    printf("failed %d\n", failed);
    return 0;
}
"#;

/// Odd addresses get the kernel's own answers through the broker: an address longer than `sockaddr_un`, a
/// non-socket descriptor, a bad descriptor, an IP address on a Unix socket — the same errno as without a sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_connects_get_the_kernels_answers() {
    if !have_cc() {
        return;
    }
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let work = open_dir();
    compile_c(work.path(), "odd", ODD_C);
    let native = std::process::Command::new(work.path().join("odd"))
        .current_dir(work.path())
        .output()
        .unwrap();
    let native = String::from_utf8_lossy(&native.stdout).to_string();
    assert_eq!(native.lines().count(), 4, "{native}");
    let r = ex
        .execute(plan("./odd", &mark, work.path(), Network::Loopback))
        .await
        .unwrap();
    assert_eq!(r.output.text, native, "{r:?}");
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// The program of [`odd_connects_get_the_kernels_answers`]: one errno per line.
const ODD_C: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
int main(void) {
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, "odd.sock");
    unlink(a.sun_path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    bind(l, (struct sockaddr *)&a, sizeof a);
    listen(l, 8);
    char big[128] = {0};
    memcpy(big, &a, sizeof a);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    printf("overlong %d\n", connect(s, (struct sockaddr *)big, 120) ? errno : 0);
    int f = open("odd.c", O_RDONLY);
    printf("not a socket %d\n", connect(f, (struct sockaddr *)&a, sizeof a) ? errno : 0);
    printf("bad fd %d\n", connect(999, (struct sockaddr *)&a, sizeof a) ? errno : 0);
    struct sockaddr_in in = {0};
    in.sin_family = AF_INET;
    printf("inet on unix %d\n", connect(s, (struct sockaddr *)&in, sizeof in) ? errno : 0);
    return 0;
}
"#;

/// A server one command of the session starts in the background is reached by the session's next command, as in one
/// terminal (both in the session's loopback network).
async fn across_commands(ex: &Executor, mark: &str, dir: &Path) {
    let server = "python3 -c \"
import socket
s = socket.socket(socket.AF_UNIX); s.bind('server.sock'); s.listen(); print('listening', flush=True)
while True:
    c, _ = s.accept(); c.sendall(b'server-answered'); c.close()
\"";
    let mut bg = plan(server, mark, dir, Network::Loopback);
    bg.background = true;
    bg.startup_wait = Some(Duration::from_secs(5));
    let started = ex.execute(bg).await.unwrap();
    assert!(started.running, "{started:?}");
    let id = started.id.clone();
    wait_for_output_in(ex, &id, Some(&Session::from("own-sockets")), "listening").await;
    let r = ex
        .execute(plan(&client("server.sock"), mark, dir, Network::Loopback))
        .await
        .unwrap();
    assert_eq!(r.output.text, "server-answered\n", "{r:?}");
    assert!(r.refused_sockets.is_empty(), "{r:?}");
    let path: PathBuf = dir.join("server.sock");
    assert!(path.exists());
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the session sandbox in a user namespace of its own).
    every_unix_socket_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_UNIX_SOCKETS_AS_USER"
);
