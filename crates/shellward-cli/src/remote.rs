//! The operator's views of a running `shellward serve`, over its own HTTP address and token: `shellward ps` (every
//! session's processes) and `shellward approvals list | approve ID | deny ID` (a session's pending approvals). What the
//! server sends is the model's text: it is shown escaped (`shellward::shown`).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::process::ExitCode;

/// Where the server is and how to be let in.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The running `shellward serve`'s address: its HTTP URL, or `unix:PATH` for one listening on a Unix socket
    /// (`serve --listen unix:PATH`).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:7878")]
    pub server: String,
    /// The server's bearer token (default: $SHELLWARD_TOKEN).
    #[arg(long, env = "SHELLWARD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the server's JSON answer instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PsArgs {
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// The approvals a session's commands wait for, oldest first, each with its question as a person should read it.
    List(ApprovalsList),
    /// Approve a pending approval: its command runs (exactly the plan asked about), and its result is printed.
    Approve(ApprovalAnswerArgs),
    /// Refuse a pending approval: nothing runs.
    Deny(ApprovalAnswerArgs),
}

#[derive(Args, Debug)]
pub struct ApprovalsList {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The session whose approvals to list (default: the anonymous session, or the token's first).
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(Args, Debug)]
pub struct ApprovalAnswerArgs {
    /// The approval's id (`ap-…`, from `approvals list`).
    pub id: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// The session the approval belongs to.
    #[arg(long)]
    pub session: Option<String>,
    /// (approve) Remember the command as approved for the rest of the session.
    #[arg(long)]
    pub remember: bool,
    /// (deny) Why, for the agent.
    #[arg(long)]
    pub reason: Option<String>,
}

/// One request to the server: its status and JSON answer; an error that says what to check when it cannot be reached.
pub fn request(
    server: &ServerArgs,
    method: &str,
    path: &str,
    session: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    #[cfg(unix)]
    if let Some(socket) = server.server.strip_prefix("unix:") {
        return unix_request(
            server,
            std::path::Path::new(socket),
            method,
            path,
            session,
            body,
        );
    }
    let url = format!("{}{path}", server.server.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(60)))
        .build()
        .into();
    let auth = server.token.as_ref().map(|t| format!("Bearer {t}"));
    let response = if method == "GET" {
        let mut r = agent.get(&url);
        if let Some(a) = &auth {
            r = r.header("Authorization", a);
        }
        if let Some(s) = session {
            r = r.header("X-Shellward-Session", s);
        }
        r.call()
    } else {
        let mut r = agent.post(&url).header("Content-Type", "application/json");
        if let Some(a) = &auth {
            r = r.header("Authorization", a);
        }
        if let Some(s) = session {
            r = r.header("X-Shellward-Session", s);
        }
        r.send(body.map(Value::to_string).unwrap_or_default().as_str())
    };
    let mut response = response.with_context(|| {
        format!(
            "cannot reach {url}; is `shellward serve` listening there? (give its address with --server URL)"
        )
    })?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, value))
}

/// [`request`] over `serve --listen unix:PATH`'s socket: one HTTP/1.1 request with `Connection: close`, the answer
/// read to its end (a length or chunks). Written here because ureq speaks TCP only; the server is ours, so the
/// answer is plain JSON.
#[cfg(unix)]
fn unix_request(
    server: &ServerArgs,
    socket: &std::path::Path,
    method: &str,
    path: &str,
    session: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).with_context(|| {
        format!(
            "cannot reach unix:{}; is `shellward serve --listen unix:{}` running? (give its address with --server)",
            socket.display(),
            socket.display()
        )
    })?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(t) = &server.token {
        head += &format!("Authorization: Bearer {t}\r\n");
    }
    if let Some(s) = session {
        head += &format!("X-Shellward-Session: {s}\r\n");
    }
    if method != "GET" {
        head += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            payload.len()
        );
    }
    head += "\r\n";
    stream.write_all(head.as_bytes())?;
    stream.write_all(payload.as_bytes())?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .with_context(|| format!("reading the answer from unix:{}", socket.display()))?;
    let (status, text) = http_answer(&raw).with_context(|| {
        format!(
            "unix:{} answered something that is not HTTP; is it a `shellward serve` socket?",
            socket.display()
        )
    })?;
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, value))
}

/// An HTTP/1.1 answer's status and body (de-chunked); `None` when it is not one.
#[cfg(unix)]
fn http_answer(raw: &[u8]) -> Option<(u16, String)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let mut body = &raw[split + 4..];
    if !chunked {
        return Some((status, String::from_utf8_lossy(body).into_owned()));
    }
    let mut out = Vec::new();
    loop {
        let nl = body.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&body[..nl]).ok()?;
        let n = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        body = &body[nl + 2..];
        if n == 0 {
            break;
        }
        out.extend_from_slice(body.get(..n)?);
        body = body.get(n + 2..)?;
    }
    Some((status, String::from_utf8_lossy(&out).into_owned()))
}

/// The server's answer when it is not a 2xx: an error naming the status and the server's own message.
fn refused(path: &str, status: u16, value: &Value) -> anyhow::Error {
    let message = value["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string());
    let hint = if status == 401 {
        " (give the server's token: --token-file's contents in SHELLWARD_TOKEN, or --token)"
    } else {
        ""
    };
    anyhow::anyhow!(
        "the server answered {status} to {path}: {}{hint}",
        shellward::shown::line(&message)
    )
}

/// `shellward ps`.
pub fn ps(args: PsArgs) -> Result<ExitCode> {
    let (status, value) = request(&args.server, "GET", "/v1/processes", None, None)?;
    if status != 200 {
        return Err(refused("/v1/processes", status, &value));
    }
    if args.server.json {
        crate::print_line(shellward::shown::json(&value))?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = |v: &Value| v.as_str().map(shellward::shown::line).unwrap_or_default();
    crate::print_line(format!(
        "{:<16} {:<14} {:<10} {:>7}  COMMAND",
        "SESSION", "ID", "STATE", "AGE"
    ))?;
    for p in value["processes"].as_array().into_iter().flatten() {
        let session = p["session"]
            .as_str()
            .map_or("-".into(), shellward::shown::line);
        let state = if p["running"] == true {
            "running".to_string()
        } else {
            text(&p["state"])
        };
        crate::print_line(format!(
            "{session:<16} {:<14} {:<10} {:>7}  {}",
            text(&p["process_id"]),
            state,
            age(p["age_s"].as_u64().unwrap_or(0)),
            cut(&text(&p["command"]), 100)
        ))?;
    }
    if let Some(n) = value["omitted"].as_u64().filter(|n| *n > 0) {
        crate::print_line(format!("({n} more not listed)"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `12s`, `5m`, `3h`, `2d`.
fn age(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// `text` cut to `max` characters, the cut said.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}…")
}

/// `shellward approvals …`.
pub fn approvals(cmd: ApprovalsCommand) -> Result<ExitCode> {
    match cmd {
        ApprovalsCommand::List(args) => {
            let (status, value) = request(
                &args.server,
                "GET",
                "/v1/approvals",
                args.session.as_deref(),
                None,
            )?;
            if status != 200 {
                return Err(refused("/v1/approvals", status, &value));
            }
            if args.server.json {
                crate::print_line(shellward::shown::json(&value))?;
                return Ok(ExitCode::SUCCESS);
            }
            let pending = value["pending"].as_array().cloned().unwrap_or_default();
            if pending.is_empty() {
                crate::print_line("no approval is pending in this session")?;
            }
            for a in &pending {
                let id = a["id"]
                    .as_str()
                    .map(shellward::shown::line)
                    .unwrap_or_default();
                let expires = a["expires_in_ms"].as_u64().unwrap_or(0) / 1000;
                crate::print_line(format!("{id} (expires in {expires}s)"))?;
                // `shown.prompt` is the whole question as a person should read it (already escaped by the server,
                // escaped again here in case a server is not one).
                let prompt = a["shown"]["prompt"]
                    .as_str()
                    .or(a["question"].as_str())
                    .unwrap_or_default();
                for line in shellward::shown::text(prompt).lines() {
                    crate::print_line(format!("  {line}"))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Approve(args) => answer(&args, true),
        ApprovalsCommand::Deny(args) => answer(&args, false),
    }
}

fn answer(args: &ApprovalAnswerArgs, approve: bool) -> Result<ExitCode> {
    let mut body = json!({"decision": if approve { "approve" } else { "deny" }});
    if approve && args.remember {
        body["remember"] = "session".into();
    }
    if let Some(reason) = &args.reason {
        body["reason"] = reason.as_str().into();
    }
    let path = format!("/v1/approvals/{}", args.id);
    let (status, value) = request(
        &args.server,
        "POST",
        &path,
        args.session.as_deref(),
        Some(&body),
    )?;
    if status != 200 {
        return Err(refused(&path, status, &value));
    }
    if args.server.json {
        crate::print_line(shellward::shown::json(&value))?;
        return Ok(ExitCode::SUCCESS);
    }
    if approve {
        let exit = value["exit_code"]
            .as_i64()
            .map(|c| format!("exit {c}"))
            .or_else(|| value["signal"].as_str().map(|s| format!("killed by {s}")))
            .unwrap_or_else(|| {
                if value["running"] == true {
                    "running in the background".into()
                } else {
                    "no exit status".into()
                }
            });
        crate::print_line(format!("approved; it ran: {exit}"))?;
        if let Some(out) = value["output"].as_str().filter(|o| !o.is_empty()) {
            crate::print_line(shellward::shown::text(out).trim_end().to_string())?;
        }
    } else {
        crate::print_line("denied; nothing ran")?;
    }
    Ok(ExitCode::SUCCESS)
}
