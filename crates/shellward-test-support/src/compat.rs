//! The compatibility suite's scenarios: everyday developer work (git, Python, Node, Rust, C, tmux, gpg, ssh-agent,
//! FIFOs, locks, shared memory, sockets, loopback servers, the shell's own features), each a `bash` script run once
//! under plain `bash -c` ([`under_bash`]) and once through a surface of shellward (the facade's, `run`'s, MCP's and
//! HTTP's tests), compared as [`Seen`].

/// One piece of everyday work: what it needs on `PATH`, and the script (run in a fresh, empty directory).
pub struct Scenario {
    /// What it is, as the report names it.
    pub name: &'static str,
    /// The programs it needs on `PATH` (missing: the scenario is skipped, saying so).
    pub needs: &'static [&'static str],
    /// The bash script.
    pub script: &'static str,
}

const GIT: &str =
    "git -c user.email=dev@example.invalid -c user.name=dev -c init.defaultBranch=main";

/// The scenarios; `$G` in a script stands for the git command with an identity.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "git init and commit",
        needs: &["git"],
        script: "$G init -q . && echo a > a && $G add a && $G commit -qm one && $G log --oneline | wc -l",
    },
    Scenario {
        name: "git branch and switch",
        needs: &["git"],
        script: "$G init -q . && $G commit -q --allow-empty -m x && $G branch feat && $G switch -q feat && $G branch --show-current",
    },
    Scenario {
        name: "git stash",
        needs: &["git"],
        script: "$G init -q . && echo a > f && $G add f && $G commit -qm a && echo b > f && $G stash -q && cat f && $G stash pop -q && cat f",
    },
    Scenario {
        name: "git worktree beside the workdir",
        needs: &["git"],
        script: "$G init -q repo && cd repo && $G commit -q --allow-empty -m x && $G worktree add -q ../wt -b wt && $G worktree list | wc -l && $G worktree remove ../wt && echo removed",
    },
    Scenario {
        name: "git hook",
        needs: &["git"],
        script: "$G init -q . && printf '#!/bin/sh\\necho hook ran\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && $G commit -q --allow-empty -m x",
    },
    Scenario {
        name: "git gc and fsck",
        needs: &["git"],
        script: "$G init -q . && for i in 1 2 3; do echo $i > f$i; $G add f$i; $G commit -qm c$i; done && $G gc -q && $G fsck -q && echo clean",
    },
    Scenario {
        name: "git local clone",
        needs: &["git"],
        script: "$G init -q src && (cd src && echo x > x && $G add x && $G commit -qm x) && $G clone -q src dst && cat dst/x",
    },
    Scenario {
        name: "git tag and describe",
        needs: &["git"],
        script: "$G init -q . && $G commit -q --allow-empty -m x && $G tag v1 && $G describe --tags",
    },
    Scenario {
        name: "git diff and apply",
        needs: &["git"],
        script: "$G init -q . && echo a > f && $G add f && $G commit -qm a && echo b > f && $G diff > p && $G checkout -q f && $G apply p && cat f",
    },
    Scenario {
        name: "git rebase",
        needs: &["git"],
        script: "$G init -q . && $G commit -q --allow-empty -m a && $G switch -qc b && $G commit -q --allow-empty -m b && $G switch -q main && $G commit -q --allow-empty -m c && $G switch -q b && $G rebase -q main && $G log --format=%s | tr '\\n' ' '",
    },
    Scenario {
        name: "python venv",
        needs: &["python3"],
        script: "python3 -m venv v && v/bin/python -c 'import sys; print(sys.prefix != sys.base_prefix)'",
    },
    Scenario {
        name: "python pip in a venv",
        needs: &["python3"],
        script: "python3 -m venv v && v/bin/python -m pip --version >/dev/null && echo pip",
    },
    Scenario {
        name: "python multiprocessing fork",
        needs: &["python3"],
        script: "python3 -c \"import multiprocessing as m\nwith m.get_context('fork').Pool(2) as p: print(sum(p.map(abs, range(100))))\"",
    },
    Scenario {
        name: "python multiprocessing spawn",
        needs: &["python3"],
        script: "printf 'import multiprocessing as m\\nif __name__ == \"__main__\":\\n    with m.get_context(\"spawn\").Pool(2) as p: print(sum(p.map(abs, range(100))))\\n' > s.py && python3 s.py",
    },
    Scenario {
        name: "python multiprocessing forkserver",
        needs: &["python3"],
        script: "printf 'import multiprocessing as m\\nif __name__ == \"__main__\":\\n    with m.get_context(\"forkserver\").Pool(2) as p: print(sum(p.map(abs, range(100))))\\n' > s.py && python3 s.py",
    },
    Scenario {
        name: "python semaphores and shared memory",
        needs: &["python3"],
        script: "python3 -c \"import multiprocessing as m, multiprocessing.shared_memory as s\nl = m.Semaphore(2); l.acquire(); b = s.SharedMemory(create=True, size=16); b.buf[0] = 7; print(b.buf[0]); b.close(); b.unlink()\"",
    },
    Scenario {
        name: "python sqlite",
        needs: &["python3"],
        script: "python3 -c \"import sqlite3\nc = sqlite3.connect('d.db'); c.execute('create table t(x)'); c.executemany('insert into t values (?)', [(i,) for i in range(10)]); c.commit(); print(c.execute('select sum(x) from t').fetchone()[0])\"",
    },
    Scenario {
        name: "python threads and subprocess",
        needs: &["python3"],
        script: "python3 -c \"import subprocess, threading\nr = []\nt = [threading.Thread(target=lambda: r.append(subprocess.run(['echo', 'x'], capture_output=True).stdout)) for _ in range(4)]\n[x.start() for x in t]; [x.join() for x in t]; print(len(r))\"",
    },
    Scenario {
        name: "python unix socket in the workdir",
        needs: &["python3"],
        script: "python3 -c \"import socket, os\ns = socket.socket(socket.AF_UNIX); s.bind('s.sock'); s.listen(); c = socket.socket(socket.AF_UNIX); c.connect('s.sock'); a, _ = s.accept(); c.send(b'hi'); print(a.recv(2).decode())\"",
    },
    Scenario {
        name: "python loopback server and client",
        needs: &["python3"],
        script: "python3 -c \"import socket\ns = socket.create_server(('127.0.0.1', 0)); c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.send(b'ok'); print(a.recv(2).decode())\"",
    },
    Scenario {
        name: "python tempfile",
        needs: &["python3"],
        script: "python3 -c \"import tempfile\nwith tempfile.NamedTemporaryFile() as f: f.write(b'x'); f.flush(); print(open(f.name).read())\"",
    },
    Scenario {
        name: "sqlite3 cli",
        needs: &["sqlite3"],
        script: "sqlite3 d.db 'create table t(x); insert into t values (41); select x + 1 from t;'",
    },
    Scenario {
        name: "node child_process",
        needs: &["node"],
        script: "node -e \"console.log(require('child_process').execSync('echo hi').toString().trim())\"",
    },
    Scenario {
        name: "node worker_threads",
        needs: &["node"],
        script: "node -e \"const {Worker} = require('worker_threads'); new Worker('require(\\\"worker_threads\\\").parentPort.postMessage(6*7)', {eval: true}).on('message', m => console.log(m))\"",
    },
    Scenario {
        name: "node loopback http",
        needs: &["node"],
        script: "node -e \"const h = require('http'); const s = h.createServer((q, r) => r.end('pong')).listen(0, '127.0.0.1', () => h.get('http://127.0.0.1:' + s.address().port, r => { r.on('data', d => { console.log(String(d)); s.close(); }); }));\"",
    },
    Scenario {
        name: "node fs and timers",
        needs: &["node"],
        script: "node -e \"require('fs').writeFileSync('f', 'x'); setTimeout(() => console.log(require('fs').readFileSync('f', 'utf8')), 50)\"",
    },
    Scenario {
        name: "npm init and scripts",
        needs: &["npm"],
        script: "export npm_config_cache=$PWD/.npm-cache npm_config_update_notifier=false; mkdir app && cd app && npm init -y >/dev/null && npm pkg set scripts.hi='echo hi' && npm run -s hi",
    },
    Scenario {
        name: "npm install of a local package",
        needs: &["npm"],
        script: "export npm_config_cache=$PWD/.npm-cache npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false; mkdir lib && (cd lib && npm init -y >/dev/null) && mkdir app && cd app && npm init -y >/dev/null && npm install -s ../lib >/dev/null && ls node_modules",
    },
    Scenario {
        name: "cargo new, build, test",
        needs: &["cargo"],
        script: "cargo new -q --vcs none app && cd app && cargo build -q --offline && ./target/debug/app && cargo test -q --offline 2>&1 | grep -c 'test result: ok'",
    },
    Scenario {
        name: "cc and run",
        needs: &["cc"],
        script: "printf '#include <stdio.h>\\nint main(void){puts(\"built\");return 0;}\\n' > m.c && cc -o m m.c && ./m",
    },
    Scenario {
        name: "make",
        needs: &["make", "cc"],
        script: "printf 'all: m\\n\\t./m\\nm: m.c\\n\\tcc -o m m.c\\n' > Makefile && printf 'int main(void){return 0;}\\n' > m.c && make -s && echo made",
    },
    Scenario {
        name: "perl",
        needs: &["perl"],
        script: "perl -e 'print join(\",\", map { $_ * 2 } 1..3), \"\\n\"'",
    },
    Scenario {
        name: "tmux with its own socket",
        needs: &["tmux"],
        script: "tmux -S $PWD/t.sock new-session -d -s work 'sleep 30' && tmux -S $PWD/t.sock list-sessions -F '#S' && tmux -S $PWD/t.sock kill-server",
    },
    Scenario {
        name: "gpg symmetric round trip",
        needs: &["gpg", "gpgconf"],
        script: "mkdir -m 700 g && export GNUPGHOME=$PWD/g && echo secret | gpg --batch --quiet --pinentry-mode loopback --passphrase p --symmetric -o s.gpg && gpg --batch --quiet --pinentry-mode loopback --passphrase p -d s.gpg; gpgconf --kill gpg-agent",
    },
    Scenario {
        name: "ssh-keygen",
        needs: &["ssh-keygen"],
        script: "ssh-keygen -q -t ed25519 -N '' -f k && ssh-keygen -l -f k.pub | awk '{print $1}'",
    },
    Scenario {
        name: "ssh-agent with a key",
        needs: &["ssh-agent", "ssh-add", "ssh-keygen"],
        script: "ssh-keygen -q -t ed25519 -N '' -f k && eval $(ssh-agent -s -a $PWD/agent.sock) >/dev/null && ssh-add -q k 2>/dev/null; ssh-add -l | wc -l; ssh-agent -k >/dev/null",
    },
    Scenario {
        name: "mkfifo",
        needs: &["mkfifo"],
        script: "mkfifo p && (echo through > p &) && cat p",
    },
    Scenario {
        name: "flock",
        needs: &["flock"],
        script: "flock l -c 'echo locked' && flock -n l true && echo free",
    },
    Scenario {
        name: "/dev/shm",
        needs: &[],
        script: "f=/dev/shm/sw-compat-$RANDOM$RANDOM; echo shared > $f && cat $f && rm $f",
    },
    Scenario {
        name: "/dev nodes",
        needs: &["head", "wc"],
        script: "head -c 16 /dev/urandom | wc -c; head -c 4 /dev/zero | wc -c; echo x > /dev/null && echo null",
    },
    Scenario {
        name: "tar and gzip",
        needs: &["tar", "gzip"],
        script: "mkdir d && echo x > d/f && tar czf d.tgz d && rm -r d && tar xzf d.tgz && cat d/f",
    },
    Scenario {
        name: "find, xargs, sort",
        needs: &["find", "xargs", "sort"],
        script: "mkdir -p a/b && touch a/1 a/b/2 && find . -type f | sort | xargs -n1 basename | tr '\\n' ' '",
    },
    Scenario {
        name: "xargs in parallel",
        needs: &["xargs", "seq"],
        script: "seq 1 20 | xargs -P 4 -n 1 sh -c 'echo $0' | sort -n | tail -1",
    },
    Scenario {
        name: "sed -i",
        needs: &["sed"],
        script: "echo hello > f && sed -i 's/hello/bye/' f && cat f",
    },
    Scenario {
        name: "symlinks and hard links",
        needs: &["readlink"],
        script: "echo x > f && ln -s f s && ln f h && readlink s && cat h",
    },
    Scenario {
        name: "an executable script",
        needs: &[],
        script: "printf '#!/bin/sh\\necho ran $1\\n' > s.sh && chmod +x s.sh && ./s.sh arg",
    },
    Scenario {
        name: "umask and modes",
        needs: &["stat"],
        script: "umask 077 && touch f && stat -c %a f",
    },
    Scenario {
        name: "a background job waited for",
        needs: &[],
        script: "(sleep 0.2; echo late) & wait; echo done",
    },
    Scenario {
        name: "timeout",
        needs: &["timeout"],
        script: "timeout 0.3 sleep 5; echo $?",
    },
    Scenario {
        name: "trap on exit",
        needs: &[],
        script: "trap 'echo bye' EXIT; echo hi",
    },
    Scenario {
        name: "a here-document",
        needs: &["cat"],
        script: "cat <<EOF\nline one\nline two\nEOF",
    },
    Scenario {
        name: "set -e and an exit status",
        needs: &[],
        script: "set -e; echo before; false; echo never",
    },
    Scenario {
        name: "exit 3",
        needs: &[],
        script: "echo out; echo err >&2; exit 3",
    },
    Scenario {
        name: "pipes and pipefail",
        needs: &[],
        script: "set -o pipefail; false | true; echo $?",
    },
    Scenario {
        name: "stdin is empty",
        needs: &["cat", "wc"],
        script: "cat | wc -c",
    },
    Scenario {
        name: "a large output",
        needs: &["seq"],
        script: "seq 1 20000 | tail -3",
    },
    Scenario {
        name: "a file in /tmp",
        needs: &["mktemp"],
        script: "f=$(mktemp) && echo temp > $f && cat $f && rm $f",
    },
    Scenario {
        name: "date arithmetic",
        needs: &["date"],
        script: "date -u -d @86400 +%F",
    },
    Scenario {
        name: "the user id",
        needs: &["id"],
        script: "id -u",
    },
    Scenario {
        name: "java version",
        needs: &["java"],
        // The version line, not a JVM warning before it: two sandboxed JVMs with the same pid in their own PID
        // namespaces can meet in the shared /tmp/hsperfdata_<user> and one then warns `[perf,memops]` (its perf
        // counters off, the program unchanged).
        script: "java -version 2>&1 | grep -m1 -o '^openjdk'",
    },
];

/// What a run gave: its exit status and its output (stdout and stderr together), the directory written as `$W`.
#[derive(Debug, PartialEq)]
pub struct Seen {
    /// The exit status (`None`: killed by a signal).
    pub exit: Option<i32>,
    /// stdout and stderr together, the scenario's directory written as `$W`.
    pub output: String,
}

/// `text` with `dir` written as `$W`.
pub fn normalized(text: &str, dir: &std::path::Path) -> String {
    text.replace(&dir.display().to_string(), "$W")
}

/// The scenario's script, `$G` the git command with an identity.
pub fn script(s: &Scenario) -> String {
    s.script.replace("$G", GIT)
}

/// Whether `tool` is on `PATH`.
pub fn available(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Under plain bash, stdin the null device, in a fresh directory.
pub fn under_bash(s: &Scenario) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new("bash")
        .args(["-c", &format!("exec 2>&1; {}", script(s))])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Seen {
        exit: o.status.code(),
        output: normalized(&String::from_utf8_lossy(&o.stdout), dir.path()),
    }
}

/// `text` as one single-quoted shell word.
pub fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The scenarios that talk over the loopback network, which `network = "none"` does not have.
pub const NEED_LOOPBACK: &[&str] = &["python loopback server and client", "node loopback http"];

/// The command a surface runs for `s`: bash (asked for: the surfaces' shell is `sh`) with stderr joined to stdout.
pub fn command(s: &Scenario) -> String {
    format!(
        "exec bash -c {}",
        quoted(&format!("exec 2>&1; {}", script(s)))
    )
}
