//! The audit log: one JSON line per decision and per process end, written off the request path.
//!
//! Records go over a channel to a writer thread that buffers them and flushes when the channel goes quiet (and at
//! shutdown, so a clean shutdown loses nothing). A file is rotated by size: `audit.jsonl` → `audit.jsonl.1` → … up to
//! `keep` old files. What commands print is never recorded, only byte counts, unless `include_output` is set.

use serde_json::{Value, json};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// The version of decision records (`"v"`): 2 added `request`, every field of the request the chain decided, so a
/// replay can decide it again ([`request_from_record`]); 3 added the request's `confinement`, `ceiling`, `hidden`,
/// `startup_wait_ms`, `os` and `shell`, the plan's `confinement` and `startup_wait_ms`, and the rules that decided
/// (`rules` of a run, `rule` of a deny). Records without `v` are version 1.
pub const RECORD_VERSION: u32 = 3;

/// A policy confinement as records carry it: `{"network": "none" | "loopback" | "host" | {"allow": [...]},
/// "writable": [...] | null}` (`null`: unconfined).
pub fn confinement_json(c: &shellward_policy::Confinement) -> Value {
    use shellward_policy::Network;
    json!({
        "network": match &c.network {
            Network::Allow(list) => json!({ "allow": list }),
            other => json!(other.as_str()),
        },
        "writable": c.writable,
    })
}

/// [`confinement_json`] read back; `None` when `v` is not one.
fn confinement_from(v: &Value) -> Option<shellward_policy::Confinement> {
    use shellward_policy::Network;
    let network = match v.get("network")? {
        Value::String(s) => match s.as_str() {
            "none" => Network::None,
            "loopback" => Network::Loopback,
            "host" => Network::Host,
            _ => return None,
        },
        other => Network::Allow(
            other
                .get("allow")?
                .as_array()?
                .iter()
                .map(|e| e.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
        ),
    };
    let writable = match v.get("writable")? {
        Value::Null => None,
        list => Some(
            list.as_array()?
                .iter()
                .map(|e| e.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
        ),
    };
    Some(shellward_policy::Confinement::new(network, writable))
}

/// A policy request as a decision record carries it.
pub fn request_json(r: &shellward_policy::Request) -> Value {
    use shellward_policy::OnTimeout;
    json!({
        "command": r.command,
        "workdir": r.workdir,
        "timeout_ms": r.timeout_ms,
        "background": r.background,
        "on_timeout": r.on_timeout.map(|o| match o {
            OnTimeout::Kill => "kill",
            OnTimeout::Background => "background",
        }),
        "env": r.env,
        "context": r.context,
        "interactive": r.interactive,
        "tty": r.tty,
        "confinement": confinement_json(&r.confinement),
        "ceiling": confinement_json(&r.ceiling),
        "hidden": r.hidden,
        "startup_wait_ms": r.startup_wait_ms,
        "os": r.os,
        "shell": r.shell,
    })
}

/// The request a decision record carries (version 2 on), to decide it again; `None` for other records and for
/// decision records written before requests were recorded.
pub fn request_from_record(record: &Value) -> Option<shellward_policy::Request> {
    use shellward_policy::OnTimeout;
    if record.get("type")?.as_str()? != "decision" {
        return None;
    }
    let r = record.get("request")?;
    let pairs = |key: &str| -> Option<Vec<(String, String)>> {
        r.get(key)?
            .as_array()?
            .iter()
            .map(|p| {
                let p = p.as_array()?;
                Some((
                    p.first()?.as_str()?.to_string(),
                    p.get(1)?.as_str()?.to_string(),
                ))
            })
            .collect()
    };
    let mut request = shellward_policy::Request::new(r.get("command")?.as_str()?);
    request.workdir = r.get("workdir").and_then(Value::as_str).map(str::to_string);
    request.timeout_ms = r.get("timeout_ms").and_then(Value::as_u64);
    request.background = r.get("background").and_then(Value::as_bool);
    request.on_timeout = match r.get("on_timeout").and_then(Value::as_str) {
        Some("kill") => Some(OnTimeout::Kill),
        Some("background") => Some(OnTimeout::Background),
        _ => None,
    };
    request.env = pairs("env")?;
    request.context = pairs("context")?;
    request.interactive = r
        .get("interactive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    request.tty = r.get("tty").and_then(Value::as_bool).unwrap_or(false);
    // Version 3 on; an older record decides again unconfined (what its policies saw: they had no confinement).
    if let Some(c) = r.get("confinement").and_then(confinement_from) {
        request.confinement = c;
    }
    if let Some(c) = r.get("ceiling").and_then(confinement_from) {
        request.ceiling = c;
    }
    if let Some(list) = r.get("hidden").and_then(Value::as_array) {
        request.hidden = list
            .iter()
            .filter_map(|e| e.as_str().map(str::to_string))
            .collect();
    }
    request.startup_wait_ms = r.get("startup_wait_ms").and_then(Value::as_u64);
    if let Some(os) = r.get("os").and_then(Value::as_str) {
        request.os = os.to_string();
    }
    if let Some(shell) = r.get("shell").and_then(Value::as_str) {
        request.shell = shell.to_string();
    }
    Some(request)
}

/// Where audit records go (`[audit]` in the configuration file). Built with [`AuditConfig::to`] (or from
/// `Default`) and then changed field by field: the fields can grow.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditConfig {
    /// The log file (JSON lines, created 0600 when missing), or `-` for standard output.
    pub path: PathBuf,
    /// Rotate when the file would grow past this many bytes (0: never).
    pub max_bytes: u64,
    /// Rotated files kept (`PATH.1` is the newest).
    pub keep: u32,
    /// Record the head/tail view of each process's output in its end record (off: only byte counts).
    pub include_output: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            path: PathBuf::new(),
            max_bytes: 100 * 1024 * 1024,
            keep: 5,
            include_output: false,
        }
    }
}

impl AuditConfig {
    /// Records to `path` (`-`: standard output), with the default rotation and without output.
    pub fn to(path: impl Into<PathBuf>) -> AuditConfig {
        AuditConfig {
            path: path.into(),
            ..AuditConfig::default()
        }
    }
}

/// Seconds since the Unix epoch with milliseconds, for the `time` field.
pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// Records waiting to be written, at most; a burst past it makes callers wait (no record is dropped).
const QUEUE: usize = 4096;
/// Flush after this long without a new record.
const QUIET: Duration = Duration::from_millis(200);

/// The running audit log.
pub(crate) struct AuditLog {
    tx: Mutex<Option<SyncSender<Value>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    pub(crate) include_output: bool,
    /// How many processes' end records are still to be written (their waiters run), sent on every change: a
    /// shutdown waits for the ends of what it stopped on this, not on a guessed sleep.
    ends_pending: tokio::sync::watch::Sender<usize>,
}

/// An end record still to be written: counted from [`AuditLog::end_pending`] until dropped (written, or its waiter
/// gone).
pub(crate) struct PendingEnd {
    ends: tokio::sync::watch::Sender<usize>,
}

impl Drop for PendingEnd {
    fn drop(&mut self) {
        self.ends.send_modify(|n| *n = n.saturating_sub(1));
    }
}

enum Sink {
    Stdout(BufWriter<io::Stdout>),
    File {
        out: BufWriter<File>,
        path: PathBuf,
        written: u64,
        max_bytes: u64,
        keep: u32,
    },
}

/// Opens the log for appending, 0600 when created, never through a symbolic link planted at its path.
/// Opens (or creates, 0600) the audit file for appending. Refused: a symbolic link, anything but a regular file (a
/// FIFO would block every decision; a device is no log), and a file owned by another user (someone else could read
/// or rewrite the record). Opened non-blocking, so a FIFO cannot hold the open itself.
fn open_file(path: &Path) -> io::Result<File> {
    let not_regular = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file (a FIFO, device, socket or link); give the path of a file",
        )
    };
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file()) {
        return Err(not_regular());
    }
    crate::sys::open_append_owned(path, not_regular)
}

impl Sink {
    fn write(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stdout(out) => out.write_all(line),
            Sink::File {
                out,
                path,
                written,
                max_bytes,
                keep,
            } => {
                if *max_bytes > 0 && *written > 0 && *written + line.len() as u64 > *max_bytes {
                    out.flush()?;
                    for k in (1..*keep).rev() {
                        let _ = std::fs::rename(rotated(path, k), rotated(path, k + 1));
                    }
                    if *keep > 0 {
                        std::fs::rename(&*path, rotated(path, 1))?;
                    } else {
                        std::fs::remove_file(&*path)?;
                    }
                    *out = BufWriter::new(open_file(path)?);
                    *written = 0;
                }
                out.write_all(line)?;
                *written += line.len() as u64;
                Ok(())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::File { out, .. } => out.flush(),
        }
    }
}

fn rotated(path: &Path, k: u32) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{k}"));
    PathBuf::from(p)
}

impl AuditLog {
    /// Opens the log (creating the file 0600) and starts its writer thread.
    pub(crate) fn open(config: &AuditConfig) -> io::Result<AuditLog> {
        let mut sink = if config.path.as_os_str() == "-" {
            Sink::Stdout(BufWriter::new(io::stdout()))
        } else {
            let file = open_file(&config.path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot use the audit log {}: {e}{}",
                        config.path.display(),
                        if e.kind() == io::ErrorKind::NotFound
                            || e.raw_os_error() == Some(libc::EACCES)
                        {
                            "; check that its directory exists and is writable"
                        } else {
                            ""
                        }
                    ),
                )
            })?;
            let written = file.metadata()?.len();
            Sink::File {
                out: BufWriter::new(file),
                path: config.path.clone(),
                written,
                max_bytes: config.max_bytes,
                keep: config.keep,
            }
        };
        let (tx, rx) = mpsc::sync_channel::<Value>(QUEUE);
        let writer = std::thread::Builder::new()
            .name("shellward-audit".into())
            .spawn(move || {
                let mut failed = false;
                loop {
                    let record = match rx.recv_timeout(QUIET) {
                        Ok(r) => r,
                        Err(RecvTimeoutError::Timeout) => {
                            let _ = sink.flush();
                            match rx.recv() {
                                Ok(r) => r,
                                Err(_) => break,
                            }
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    let mut line = crate::shown::json(&record).into_bytes();
                    line.push(b'\n');
                    if let Err(e) = sink.write(&line)
                        && !failed
                    {
                        failed = true;
                        tracing::error!(target: "shellward::notice", "the audit log cannot be written: {e}");
                    }
                }
                let _ = sink.flush();
            })?;
        Ok(AuditLog {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            include_output: config.include_output,
            ends_pending: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Queues a record (waits only if the writer is thousands of records behind).
    pub(crate) fn record(&self, mut record: Value) {
        if let Some(map) = record.as_object_mut() {
            map.insert("time".into(), json!(now()));
        }
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(tx) = tx {
            let _ = tx.send(record);
        }
    }

    /// Writes everything queued and stops the writer (at shutdown).
    /// Counts an end record a waiter will write once its process ends.
    pub(crate) fn end_pending(&self) -> PendingEnd {
        self.ends_pending.send_modify(|n| *n += 1);
        PendingEnd {
            ends: self.ends_pending.clone(),
        }
    }

    /// Waits until every pending end record is written, or `limit` passed; returns how many are still pending.
    pub(crate) async fn ends_written(&self, limit: std::time::Duration) -> usize {
        let mut pending = self.ends_pending.subscribe();
        let _ = tokio::time::timeout(limit, pending.wait_for(|n| *n == 0)).await;
        *pending.borrow()
    }

    pub(crate) fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A FIFO at the audit path is refused at once (it would block every decision), and so is a file another user
    /// owns.
    #[test]
    fn an_audit_path_that_is_no_file_of_ours_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("audit.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let e = AuditLog::open(&AuditConfig {
            path: fifo,
            ..AuditConfig::default()
        })
        .err()
        .expect("a FIFO is refused");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(e.to_string().contains("not a regular file"), "{e}");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = dir.path().join("theirs.jsonl");
            std::fs::write(&theirs, "").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = AuditLog::open(&AuditConfig {
                path: theirs.clone(),
                ..AuditConfig::default()
            })
            .err()
            .expect("another user's file is refused");
            assert!(e.to_string().contains("owned by uid 65534"), "{e}");
            assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "");
        }
    }

    #[test]
    fn records_are_json_lines_rotated_by_size_and_flushed_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&AuditConfig {
            path: path.clone(),
            max_bytes: 300,
            keep: 2,
            include_output: false,
        })
        .unwrap();
        for i in 0..20 {
            log.record(json!({"type": "decision", "n": i, "pad": "x".repeat(40)}));
        }
        log.close();
        let mut lines = Vec::new();
        for p in [rotated(&path, 2), rotated(&path, 1), path.clone()] {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(text.len() <= 300, "{} is {} bytes", p.display(), text.len());
            lines.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
        assert!(
            !rotated(&path, 3).exists(),
            "only `keep` rotated files stay"
        );
        // The newest records, in order, none lost within what is kept.
        let ns: Vec<i64> = lines.iter().map(|l| l["n"].as_i64().unwrap()).collect();
        assert!(ns.windows(2).all(|w| w[1] == w[0] + 1), "{ns:?}");
        assert_eq!(*ns.last().unwrap(), 19);
        assert!(lines.iter().all(|l| l["time"].as_f64().is_some()));
    }
}
