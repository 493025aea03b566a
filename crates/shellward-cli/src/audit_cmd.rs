//! `shellward audit show | tail`: the audit log (`[audit] path`, one JSON record per line) as a person reads it — one
//! line per record (time, session, what happened, the command escaped as `shown` escapes it) — filtered by session,
//! record type, decision and age; `--json` prints the matching records as JSON lines (invisible characters escaped). `tail` prints the last records and,
//! with `--follow`, each new one as it is written (across a rotation too).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::Value;
use std::io::{BufRead, Seek};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Print the records of an audit log that match the filters, oldest first, one line each.
    #[command(after_help = "\
Examples:
  shellward audit show /var/log/shellward/audit.jsonl --session agent-a --since 1h
  shellward audit show audit.jsonl --decision deny --json")]
    Show(ShowArgs),
    /// Print the last records of an audit log (10 unless -n), then with --follow each new one as it is written.
    #[command(after_help = "\
Examples:
  shellward audit tail /var/log/shellward/audit.jsonl -n 50
  shellward audit tail audit.jsonl --follow --type decision")]
    Tail(TailArgs),
}

/// Which records to print.
#[derive(Args, Debug, Clone)]
pub struct Filter {
    /// The audit log (`[audit] path`).
    pub file: PathBuf,
    /// Only this session's records.
    #[arg(long)]
    pub session: Option<String>,
    /// Only records of this type: decision, end, cancel, approval.
    #[arg(long = "type", value_name = "TYPE", value_parser = ["decision", "end", "cancel", "approval", "undo"])]
    pub kind: Option<String>,
    /// Only decisions with this outcome: run, deny, ask.
    #[arg(long, value_parser = ["run", "deny", "ask"])]
    pub decision: Option<String>,
    /// Only records written within this long (`30m`, `2h`, `1d` is `24h`).
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Print the matching records as JSON lines, as the log holds them (invisible characters escaped as \uXXXX).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub filter: Filter,
}

#[derive(Args, Debug)]
pub struct TailArgs {
    #[command(flatten)]
    pub filter: Filter,
    /// How many of the last matching records to print.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub lines: usize,
    /// Keep printing records as they are written, until interrupted.
    #[arg(long)]
    pub follow: bool,
}

pub fn run(cmd: AuditCommand) -> Result<ExitCode> {
    match cmd {
        AuditCommand::Show(args) => {
            let matcher = Matcher::new(&args.filter)?;
            let file = open(&args.filter.file)?;
            for record in records(std::io::BufReader::new(file)) {
                if matcher.matches(&record) {
                    print(&record, args.filter.json)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Tail(args) => tail(&args),
    }
}

fn open(path: &Path) -> Result<std::fs::File> {
    std::fs::File::open(path).with_context(|| {
        format!(
            "cannot read the audit log {}; give the file `[audit] path` names (and run as a user who may read it)",
            path.display()
        )
    })
}

/// The JSON records of a log, skipping lines that are not one (a line cut by a crash is reported, not fatal).
fn records(reader: impl BufRead) -> impl Iterator<Item = Value> {
    reader.lines().map_while(Result::ok).filter_map(|line| {
        if line.trim().is_empty() {
            return None;
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("shellward: skipped a line that is not a JSON record ({e})");
                None
            }
        }
    })
}

/// The filters, parsed once.
struct Matcher {
    filter: Filter,
    /// Records older than this (Unix seconds) are left out.
    after: Option<f64>,
}

impl Matcher {
    fn new(filter: &Filter) -> Result<Matcher> {
        let after = match &filter.since {
            None => None,
            Some(text) => {
                let text = text.trim();
                let ms = match text.strip_suffix('d') {
                    Some(days) => days.parse::<u64>().ok().map(|d| d * 24 * 3600 * 1000),
                    None => shellward_policy::duration::parse_millis(text).ok(),
                }
                .with_context(|| {
                    format!("--since {text:?}: give a duration such as 30s, 15m, 2h or 1d")
                })?;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64();
                Some(now - ms as f64 / 1000.0)
            }
        };
        Ok(Matcher {
            filter: filter.clone(),
            after,
        })
    }

    fn matches(&self, r: &Value) -> bool {
        let f = &self.filter;
        f.session
            .as_deref()
            .is_none_or(|s| r["session"].as_str() == Some(s))
            && f.kind.as_deref().is_none_or(|k| r["type"] == k)
            && f.decision
                .as_deref()
                .is_none_or(|d| r["type"] == "decision" && r["outcome"] == d)
            && self
                .after
                .is_none_or(|after| r["time"].as_f64().is_some_and(|t| t >= after))
    }
}

fn print(record: &Value, json: bool) -> Result<()> {
    // As JSON too, invisible and bidirectional characters are escaped (`\\uXXXX`): a terminal shows what is there.
    let text = if json {
        shellward::shown::json(record)
    } else {
        line(record)
    };
    Ok(crate::print_line(text)?)
}

/// One record as a line: when, which session, what, and the command (escaped: it is the model's text).
fn line(r: &Value) -> String {
    let s = |v: &Value| v.as_str().map(shellward::shown::line).unwrap_or_default();
    let when = r["time"]
        .as_f64()
        .and_then(|t| chrono::DateTime::from_timestamp_millis((t * 1000.0) as i64))
        .map(|t| t.format("%Y-%m-%d %H:%M:%SZ").to_string())
        .unwrap_or_else(|| "?".into());
    let session = r["session"]
        .as_str()
        .map_or("-".to_string(), shellward::shown::line);
    let id = r["process_id"].as_str().unwrap_or("");
    let what = match r["type"].as_str().unwrap_or("?") {
        "decision" => {
            let outcome = r["outcome"].as_str().unwrap_or("?");
            let mut text = format!("{outcome:<5} {}", s(&r["command"]));
            if outcome == "deny" {
                text.push_str(&format!(
                    "  (by {}: {})",
                    s(&r["denied_by"]),
                    s(&r["reason"])
                ));
            }
            if outcome == "ask" {
                text.push_str(&format!("  (asks: {})", s(&r["question"])));
            }
            if r["approved"] == false {
                text.push_str("  [not approved: nothing ran]");
            }
            if r["cancelled"] == true {
                text.push_str("  [cancelled]");
            }
            if !id.is_empty() {
                text.push_str(&format!("  → {id}"));
            }
            format!("decision {text}")
        }
        "end" => {
            let how = match (r["exit_code"].as_i64(), r["signal"].as_str()) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(sig)) => format!("killed by {sig}"),
                _ => "ended".into(),
            };
            let listed = |key: &str, what: &str| {
                r[key]
                    .as_array()
                    .map(|paths| {
                        let paths: Vec<String> = paths.iter().map(s).collect();
                        format!("; {what}: {}", paths.join(", "))
                    })
                    .unwrap_or_default()
            };
            let refused = listed("refused_writes", "refused writes")
                + &listed("refused_network", "refused network")
                + &listed("refused_sockets", "refused Unix sockets")
                + if r["refused_unix_datagram"] == true {
                    "; refused a datagram Unix socket"
                } else {
                    ""
                };
            format!(
                "end      {id} {how} after {} ms{}{refused}",
                r["duration_ms"].as_u64().unwrap_or(0),
                if r["timed_out"] == true {
                    " (timed out)"
                } else {
                    ""
                }
            )
        }
        "cancel" => format!("cancel   {id} {}", s(&r["action"])),
        "undo" => match r["refused"].as_str() {
            Some(why) => format!("undo     {id} refused: {}", shellward::shown::line(why)),
            None => format!(
                "undo     {id} restored {}, removed {}{}: {}",
                r["restored"].as_u64().unwrap_or(0),
                r["removed"].as_u64().unwrap_or(0),
                if r["forced"] == true { " (forced)" } else { "" },
                s(&r["command"])
            ),
        },
        "approval" => format!(
            "approval {} by {}: {}",
            s(&r["answer"]),
            s(&r["answered_by"]),
            s(&r["command"])
        ),
        other => format!(
            "{} {}",
            shellward::shown::line(other),
            shellward::shown::line(&r.to_string())
        ),
    };
    format!("{when}  {session:<16} {what}")
}

/// `audit tail`: the last `-n` matching records, then (with `--follow`) each new one.
fn tail(args: &TailArgs) -> Result<ExitCode> {
    let matcher = Matcher::new(&args.filter)?;
    let path = &args.filter.file;
    let mut file = open(path)?;
    let mut last: std::collections::VecDeque<Value> = std::collections::VecDeque::new();
    let mut reader = std::io::BufReader::new(&mut file);
    let mut offset = 0u64;
    let mut buf = String::new();
    loop {
        buf.clear();
        let n = reader.read_line(&mut buf)?;
        if n == 0 {
            break;
        }
        if !buf.ends_with('\n') {
            // A record still being written: read it whole when following.
            break;
        }
        offset += n as u64;
        if let Ok(v) = serde_json::from_str::<Value>(buf.trim())
            && matcher.matches(&v)
        {
            last.push_back(v);
            if last.len() > args.lines {
                last.pop_front();
            }
        }
    }
    for r in &last {
        print(r, args.filter.json)?;
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    follow(path, offset, &matcher, args.filter.json)
}

/// Prints each matching record appended to `path` after `offset`, polling; a rotation (the file replaced or cut
/// shorter) starts again at the new file's beginning.
fn follow(path: &Path, mut offset: u64, matcher: &Matcher, json: bool) -> Result<ExitCode> {
    use std::io::Read;
    #[cfg(unix)]
    let identity = |m: &std::fs::Metadata| {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    };
    #[cfg(not(unix))]
    let identity = |_: &std::fs::Metadata| (0u64, 0u64);
    let mut file = open(path)?;
    let mut id = identity(&file.metadata()?);
    let mut pending: Vec<u8> = Vec::new();
    loop {
        if let Ok(now) = std::fs::metadata(path)
            && (identity(&now) != id || now.len() < offset)
        {
            // Rotated: the new file from its start.
            file = open(path)?;
            id = identity(&file.metadata()?);
            offset = 0;
            pending.clear();
        }
        file.seek(std::io::SeekFrom::Start(offset))?;
        let mut chunk = Vec::new();
        let n = (&mut file).take(1 << 20).read_to_end(&mut chunk)?;
        offset += n as u64;
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if let Ok(v) = serde_json::from_slice::<Value>(&line)
                && matcher.matches(&v)
            {
                print(&v, json)?;
            }
        }
        if n == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
