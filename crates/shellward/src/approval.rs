//! The third verdict: a command a policy asks about runs only once someone approves it.
//!
//! This module owns the seam ([`Approver`]: the person at the client, a terminal, the operator's reviewer, a host's
//! own UI), what is asked ([`ApprovalRequest`]) and answered ([`ApprovalAnswer`]), approvals parked until a surface
//! answers them later (HTTP, the 2026 MCP wire: [`SessionHandle::answer_approval`](crate::SessionHandle::answer_approval)), the approvals a session remembers,
//! and the flow that enforces the guarantees: nothing runs before the answer; what runs is exactly the plan that was
//! asked about; an answer cannot be replayed for another call, another session, or after it expired; nobody
//! answering is a deny that tells the model to ask its user.

mod reviewer;

use crate::tools::{ExecuteResult, PendingApproval};
use crate::{Decided, ToolError, ToolErrorKind};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

pub use reviewer::Reviewer;

/// A boxed future an [`Approver`] answers with.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Most approvals one session may have waiting for an answer at once; past it, an ask is denied (a model cannot
/// pile up questions for the person).
const MAX_PENDING_PER_SESSION: usize = 16;

/// Most approvals waiting for an answer in one instance, all sessions together: sessions are named by their callers
/// (an HTTP header), so a flood spread over many names is bounded too. Past it, an ask is denied; commands that need
/// no approval are not affected.
const MAX_PENDING: usize = 1024;

/// Most bytes of command and question text the waiting approvals hold, all sessions together (each holds a few
/// copies of its command): with commands of up to 128 KiB, the count alone would allow half a gigabyte.
const MAX_PENDING_BYTES: usize = 16 << 20;

/// Most commands one session remembers as approved.
const MAX_REMEMBERED_PER_SESSION: usize = 256;

/// Who answers when a policy asks, and how long an answer may take (`[approvals]`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalsConfig {
    /// How long an ask waits for its answer; then it is denied and never starts (default 5 minutes).
    pub expiry: Duration,
    /// Ask the person at the client (MCP elicitation, HTTP pending approvals, a terminal) first (default true).
    pub client: bool,
    /// A file of commands approved for every session, one per line (`#` comments): read, never written.
    pub allow_file: Option<std::path::PathBuf>,
    /// The operator's reviewer command, asked after the client.
    pub reviewer: Option<ReviewerConfig>,
    /// Preview an asked command first, where this host can (`shellward sandbox check`), and show what it would
    /// change with the question (default true): a throwaway run with no network and at most 10 s before anyone is
    /// asked, its change set in [`ApprovalRequest::changes`].
    pub preview: bool,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig {
            expiry: Duration::from_secs(300),
            client: true,
            allow_file: None,
            reviewer: None,
            preview: true,
        }
    }
}

/// The operator's reviewer (`[approvals.reviewer]`): a program that reads one JSON request and prints one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReviewerConfig {
    /// Program and arguments, run directly (no shell).
    pub command: Vec<String>,
    /// How long it may take (default 30 s); past it, the answer is no.
    pub timeout: Duration,
}

impl ReviewerConfig {
    /// The reviewer `command` with the default time limit.
    pub fn new(command: Vec<String>) -> ReviewerConfig {
        ReviewerConfig {
            command,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Reads an allow-list file: one exact command per line; blank lines and `#` comments skipped.
pub(crate) fn read_allow_file(path: &std::path::Path) -> std::io::Result<HashSet<String>> {
    Ok(std::fs::read_to_string(path)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

/// An approval's id: 128 random bits, so one cannot be guessed from another.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApprovalId(String);

impl ApprovalId {
    /// A fresh, unguessable id (`ap-` and 32 hex digits).
    fn new() -> ApprovalId {
        let mut bytes = [0u8; 16];
        // A failing system random source is a broken host: fall back to the standard library's randomly keyed
        // hashers (seeded from the OS once per process, then per hasher), never to a counter.
        if getrandom::fill(&mut bytes).is_err() {
            use std::hash::{BuildHasher, Hasher};
            for half in bytes.chunks_mut(8) {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u128(
                    SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_nanos(),
                );
                half.copy_from_slice(&h.finish().to_le_bytes());
            }
        }
        ApprovalId(format!(
            "ap-{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ApprovalId {
    fn from(s: &str) -> ApprovalId {
        ApprovalId(s.to_string())
    }
}

impl std::fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a person (or reviewer) is asked: the command that will run if approved, where, the policy's question and
/// rule.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// This approval's id.
    pub id: ApprovalId,
    /// The caller's session.
    pub session: Option<String>,
    /// The command that runs once approved (the policies may have rewritten what was asked).
    pub command: String,
    /// The command as the caller asked for it.
    pub asked: String,
    /// Where it runs; `None`: the host's default directory.
    pub workdir: Option<String>,
    /// The policy's question: what will happen and why it needs a yes.
    pub question: String,
    /// The rule that asked, when the policy names its rules.
    pub rule: Option<String>,
    /// The policy that asked.
    pub policy: String,
    /// It runs in the background.
    pub background: bool,
    /// Its network (`none`, `loopback`, `allow`, `host`).
    pub network: String,
    /// Where it may write (`None`: anywhere the user may).
    pub writable: Option<Vec<String>>,
    /// What a preview showed it would change (`[approvals] preview`): a summary line (`would delete 3 paths
    /// (src/a.rs, …), modify 1, create 0`) and up to 20 changed paths, one per line; `None` where it was not
    /// previewed (turned off, or this host cannot).
    pub changes: Option<String>,
    /// When the approval expires (a later answer is refused and the command never runs).
    pub expires_at: SystemTime,
}

impl ApprovalRequest {
    /// Time left to answer.
    pub fn expires_in(&self) -> Duration {
        self.expires_at
            .duration_since(SystemTime::now())
            .unwrap_or_default()
    }

    /// Whether the time to answer has passed.
    pub fn expired(&self) -> bool {
        SystemTime::now() >= self.expires_at
    }

    /// The request as JSON (what a reviewer reads on stdin and `GET /v1/approvals` lists): the raw fields for
    /// machines, and under `shown` the same made safe for a person (see [`crate::shown`]): the whole question as one
    /// text (`prompt`), the command and the question each escaped and behind their gutter, and how many characters
    /// were escaped.
    pub fn to_json(&self) -> Value {
        let command = crate::shown::Shown::whole(&self.command);
        let question = crate::shown::Shown::whole(&self.question);
        serde_json::json!({
            "id": self.id.as_str(),
            "session": self.session,
            "command": self.command,
            "asked": self.asked,
            "workdir": self.workdir,
            "question": self.question,
            "rule": self.rule,
            "policy": self.policy,
            "plan": {
                "command": self.command,
                "workdir": self.workdir,
                "mode": if self.background { "background" } else { "foreground" },
                "network": self.network,
                "writable": self.writable,
            },
            "expires_in_ms": self.expires_in().as_millis() as u64,
            "changes": self.changes,
            "shown": {
                "prompt": self.prompt(),
                "command": command.text,
                "command_escaped": command.escaped,
                "question": question.text,
                "question_escaped": question.escaped,
            },
        })
    }

    /// The question as one text for a person, the command shown whole: who asks and why, the command (escaped, line
    /// by line), where it runs, and what was escaped (see [`crate::shown::approval_question`]).
    pub fn prompt(&self) -> String {
        self.prompt_within(None)
    }

    /// [`ApprovalRequest::prompt`] with at most `limit` characters of the command shown (its start and end, the cut
    /// stated): for surfaces that may not show a long text whole (an MCP client's form).
    pub fn prompt_within(&self, limit: Option<usize>) -> String {
        let mut text = crate::shown::approval_question(
            &self.policy,
            self.rule.as_deref(),
            &self.question,
            &self.command,
            self.workdir.as_deref(),
            limit,
        );
        if let Some(changes) = &self.changes {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("A preview (nothing applied) shows it");
            for (i, l) in changes.lines().enumerate() {
                // Paths come from the workspace: each line escaped as the command is.
                let l = crate::shown::line(l);
                if i == 0 {
                    text.push(' ');
                    text.push_str(
                        l.strip_prefix("would")
                            .map_or(l.as_str(), str::trim_start)
                            .trim_end(),
                    );
                    text.push('\n');
                } else {
                    text.push_str("  ");
                    text.push_str(&l);
                    text.push('\n');
                }
            }
        }
        text
    }
}

/// An answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalAnswer {
    /// Run it; with `remember`, the session is not asked again about the same command.
    Approve {
        /// Remember the approval for the rest of the session.
        remember: bool,
    },
    /// Do not run it.
    Deny {
        /// Why, when the person or reviewer said (shown to the model).
        reason: Option<String>,
    },
    /// Nobody could be asked here (the client cannot show a form, no terminal): the next approver is tried.
    Unavailable,
    /// The question was handed on and is answered later, through [`SessionHandle::answer_approval`](crate::SessionHandle::answer_approval) (HTTP, the 2026
    /// MCP wire): the call answers at once with the pending approval.
    Later,
}

/// Someone who answers approvals: the person at the client, a terminal, the operator's reviewer, a host's UI.
pub trait Approver: Send + Sync {
    /// Who answers, for the audit log and the model's notes (`client`, `reviewer`, `terminal`, a host's name).
    fn name(&self) -> &str;

    /// Asks. The flow bounds the wait by the approval's expiry; an approver that cannot reach anyone answers
    /// [`ApprovalAnswer::Unavailable`] at once.
    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer>;
}

/// The approver of a surface that answers later (HTTP's pending approvals, the 2026 MCP wire's input request): it
/// parks every question, and the surface answers through [`SessionHandle::answer_approval`](crate::SessionHandle::answer_approval).
#[derive(Debug, Clone)]
pub struct Deferred {
    name: String,
}

impl Deferred {
    /// Parks questions for `name` (who will answer: `user (HTTP)`, `client`).
    pub fn new(name: impl Into<String>) -> Deferred {
        Deferred { name: name.into() }
    }
}

impl Approver for Deferred {
    fn name(&self) -> &str {
        &self.name
    }

    fn ask<'a>(&'a self, _request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::Later })
    }
}

/// The approvals of one instance: the operator's approvers, the time to answer, those waiting, those remembered.
pub(crate) struct Approvals {
    /// Approvers every call may use, after the call's own (the operator's reviewer, a host's UI).
    pub(crate) approvers: Vec<Arc<dyn Approver>>,
    /// How long an ask waits for its answer.
    pub(crate) expiry: Duration,
    /// Whether a surface may ask the person at its client (`[approvals] client`).
    pub(crate) ask_client: bool,
    /// Whether an ask is previewed first and its change set shown with the question (`[approvals] preview`).
    pub(crate) preview: bool,
    /// Approvals parked for a later answer, by id.
    pending: Mutex<HashMap<ApprovalId, Parked>>,
    /// Each session's approved calls: what an approval covers ([`remember_key`]) → the command as asked.
    remembered: Mutex<HashMap<Option<String>, HashMap<String, String>>>,
    /// Commands approved for every session (`[approvals] allow_file`; read, never written).
    allowed: HashSet<String>,
    /// Where a command runs when neither the call nor its session names a directory (what a remembered approval
    /// is compared under).
    default_workdir: std::path::PathBuf,
}

/// An approval waiting for its answer, with what runs once it comes.
struct Parked {
    request: ApprovalRequest,
    decided: Decided,
    follow: bool,
}

impl Approvals {
    /// The parked approvals (a poisoned lock is taken as it is: the map stays consistent per entry).
    fn parked(&self) -> std::sync::MutexGuard<'_, HashMap<ApprovalId, Parked>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The commands each session remembers as approved.
    fn remembered_calls(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Option<String>, HashMap<String, String>>> {
        self.remembered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Approvals with these approvers, time to answer and operator allow-list.
    pub(crate) fn new(
        approvers: Vec<Arc<dyn Approver>>,
        expiry: Duration,
        ask_client: bool,
        preview: bool,
        allowed: HashSet<String>,
        default_workdir: std::path::PathBuf,
    ) -> Approvals {
        Approvals {
            approvers,
            expiry,
            ask_client,
            preview,
            pending: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashMap::new()),
            allowed,
            default_workdir,
        }
    }

    /// Whether `decided` was approved already: its exact command in the operator's allow-list, or the very same
    /// call (see [`remember_key`]) remembered by its session.
    fn remembered(&self, decided: &Decided) -> bool {
        self.allowed.contains(&decided.request.command)
            || self
                .remembered_calls()
                .get(&decided.session)
                .is_some_and(|calls| {
                    calls.contains_key(&remember_key(decided, &self.default_workdir))
                })
    }

    fn remember(&self, decided: &Decided) {
        let mut all = self.remembered_calls();
        let calls = all.entry(decided.session.clone()).or_default();
        if calls.len() < MAX_REMEMBERED_PER_SESSION {
            calls.insert(
                remember_key(decided, &self.default_workdir),
                decided.request.command.clone(),
            );
        }
    }
}

/// What a remembered approval covers: the exact command as asked, where it runs, the environment it adds, and what
/// the policies planned (the command that runs, its network and where it may write). A look-alike (`CMD; rm -rf ~`,
/// `CMD $(…)`, `FOO=1 CMD`, the same command in another directory, with other variables or more network) differs in
/// one of them and is asked about again.
fn remember_key(decided: &Decided, default_workdir: &std::path::Path) -> String {
    let request = &decided.request;
    let mut env: Vec<&(String, String)> = request.env.iter().collect();
    env.sort();
    let plan = match &decided.decision.outcome {
        shellward_policy::Outcome::Ask(a) => Some(&a.plan),
        _ => None,
    };
    // Where it runs: the directory the policies chose, else the call's (or its session's), else the instance's
    // default.
    let workdir = plan
        .and_then(|p| p.workdir.as_ref())
        .or(request.workdir.as_ref())
        .map_or_else(
            || default_workdir.to_path_buf(),
            |w| default_workdir.join(w),
        );
    serde_json::json!({
        "command": request.command,
        "workdir": workdir.display().to_string(),
        "env": env,
        "runs": plan.map(|p| &p.command),
        "network": plan.map(|p| p.confinement.network.as_str()),
        "writable": plan.and_then(|p| p.confinement.writable.as_ref()),
        "planned_env": plan.map(|p| &p.env),
        "background": plan.map(|p| p.background),
    })
    .to_string()
}

/// What the flow decided about an asked command.
pub(crate) enum Approval {
    /// Approved (now, or remembered): run the plan; the note says by whom.
    Run(String),
    /// Not run: the result to answer with (a deny, or a pending approval).
    Answer(Box<ExecuteResult>),
}

impl crate::SessionHandle {
    /// Asks about `decided` (an ask): remembered approvals first, then `call`'s approver (the surface's client), then
    /// the operator's, each within the approval's expiry.
    pub(crate) async fn approval(
        &self,
        decided: &Decided,
        follow: bool,
        call: Option<&Arc<dyn Approver>>,
    ) -> Approval {
        let approvals = &self.sw.inner.approvals;
        if approvals.remembered(decided) {
            self.audit_approval(decided, None, "remembered", "approve", false);
            self.sw.inner.metrics.approval("remembered");
            return Approval::Run(
                "Approved earlier in this session (remembered); not asked again.".into(),
            );
        }
        let mut request = self.approval_request(decided);
        if approvals.preview {
            request.changes = self.sw.inner.runner.question_preview(decided).await;
        }
        let deadline = tokio::time::Instant::now() + approvals.expiry;
        let approvers = call
            .into_iter()
            .filter(|_| approvals.ask_client)
            .chain(approvals.approvers.iter());
        for approver in approvers {
            let answer = match tokio::time::timeout_at(deadline, approver.ask(&request)).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Approval::Answer(Box::new(self.expired(
                        decided,
                        &request,
                        approver.name(),
                    )));
                }
            };
            match answer {
                ApprovalAnswer::Unavailable => continue,
                ApprovalAnswer::Later => return self.park(request, decided, follow),
                answer => {
                    if request.expired() {
                        return Approval::Answer(Box::new(self.expired(
                            decided,
                            &request,
                            approver.name(),
                        )));
                    }
                    return self.answered(decided, &request, approver.name(), answer);
                }
            }
        }
        self.audit_approval(decided, Some(&request), "nobody", "deny", false);
        self.sw.inner.metrics.approval("unavailable");
        Approval::Answer(Box::new(refused(
            decided,
            format!(
                "Not run: this command needs a person's approval ({}), and nobody could be asked here (the client \
                 cannot show approval requests and no reviewer is configured). Ask your user to approve or run it \
                 themselves: {}",
                request.question, request.command
            ),
        )))
    }

    /// The request an ask becomes.
    fn approval_request(&self, decided: &Decided) -> ApprovalRequest {
        let (question, rule, plan) = match &decided.decision.outcome {
            shellward_policy::Outcome::Ask(a) => {
                (a.question.clone(), a.rule.clone(), Some(&a.plan))
            }
            _ => (String::new(), None, None),
        };
        let exec = decided.plan();
        ApprovalRequest {
            id: ApprovalId::new(),
            session: decided.session.clone(),
            command: plan
                .map(|p| p.command.clone())
                .unwrap_or_else(|| decided.asked.clone()),
            asked: decided.asked.clone(),
            workdir: exec.and_then(|p| p.workdir.as_ref().map(|w| w.display().to_string())),
            question,
            rule,
            policy: decided
                .decision
                .asked_by
                .clone()
                .unwrap_or_else(|| "a policy".into()),
            background: exec.is_some_and(|p| p.background),
            network: plan
                .map(|p| p.confinement.network.as_str().to_string())
                .unwrap_or_default(),
            writable: plan.and_then(|p| p.confinement.writable.clone()),
            changes: None,
            expires_at: SystemTime::now() + self.sw.inner.approvals.expiry,
        }
    }

    /// An approver's answer (approve or deny) enforced and recorded.
    fn answered(
        &self,
        decided: &Decided,
        request: &ApprovalRequest,
        by: &str,
        answer: ApprovalAnswer,
    ) -> Approval {
        match answer {
            ApprovalAnswer::Approve { remember } => {
                if remember {
                    self.sw.inner.approvals.remember(decided);
                }
                self.audit_approval(decided, Some(request), by, "approve", remember);
                self.sw.inner.metrics.approval("approved");
                let kept = if remember {
                    " It is remembered for this session: the same command is not asked about again."
                } else {
                    ""
                };
                Approval::Run(format!("Approved by the {by} before it ran.{kept}"))
            }
            ApprovalAnswer::Deny { reason } => {
                self.audit_approval(decided, Some(request), by, "deny", false);
                self.sw.inner.metrics.approval("denied");
                let why = reason
                    .filter(|r| !r.trim().is_empty())
                    .map(|r| {
                        let r = r.trim();
                        let end = if r.ends_with(['.', '!', '?']) {
                            ""
                        } else {
                            "."
                        };
                        format!(" They said: {r}{end}")
                    })
                    .unwrap_or_default();
                Approval::Answer(Box::new(refused(
                    decided,
                    format!(
                        "Not run: the {by} declined to approve it.{why} Do not retry the same command; ask your user \
                         how to go on."
                    ),
                )))
            }
            ApprovalAnswer::Unavailable | ApprovalAnswer::Later => Approval::Answer(Box::new(
                refused(decided, "Not run: the approval got no answer.".into()),
            )),
        }
    }

    /// Nobody answered in time: a deny, recorded as expired.
    fn expired(
        &self,
        decided: &Decided,
        request: &ApprovalRequest,
        waiting_on: &str,
    ) -> ExecuteResult {
        self.audit_approval(decided, Some(request), "expiry", "deny", false);
        self.sw.inner.metrics.approval("expired");
        refused(
            decided,
            format!(
                "Not run: it needed approval and the {waiting_on} did not answer within {} s, so it was denied and \
                 will not start later. Ask your user to approve it, or to run it themselves: {}",
                self.sw.inner.approvals.expiry.as_secs(),
                request.command
            ),
        )
    }

    /// Parks an approval for a later answer; the call answers at once with it pending.
    fn park(&self, request: ApprovalRequest, decided: &Decided, follow: bool) -> Approval {
        let approvals = &self.sw.inner.approvals;
        let mut pending = approvals.parked();
        pending.retain(|_, p| !p.request.expired());
        let waiting = pending
            .values()
            .filter(|p| p.request.session == decided.session)
            .count();
        let weight = |r: &ApprovalRequest| r.command.len() + r.asked.len() + r.question.len();
        let held: usize = pending.values().map(|p| weight(&p.request)).sum();
        if pending.len() >= MAX_PENDING || held + weight(&request) > MAX_PENDING_BYTES {
            let count = pending.len();
            drop(pending);
            self.audit_approval(decided, Some(&request), "nobody", "deny", false);
            return Approval::Answer(Box::new(refused(
                decided,
                format!(
                    "Not run: this server already holds as many commands waiting for approval as it keeps ({} of \
                     at most {MAX_PENDING}, {} KiB of at most {} KiB). Wait for those to be answered, then ask \
                     again.",
                    count,
                    held / 1024,
                    MAX_PENDING_BYTES / 1024
                ),
            )));
        }
        if waiting >= MAX_PENDING_PER_SESSION {
            drop(pending);
            self.audit_approval(decided, Some(&request), "nobody", "deny", false);
            return Approval::Answer(Box::new(refused(
                decided,
                format!(
                    "Not run: this session already has {MAX_PENDING_PER_SESSION} commands waiting for approval. \
                     Wait for the user to answer those first."
                ),
            )));
        }
        self.audit_approval(decided, Some(&request), "pending", "ask", false);
        self.sw.inner.metrics.approval("pending");
        let result = pending_result(decided, &request);
        let id = request.id.clone();
        pending.insert(
            id.clone(),
            Parked {
                request,
                decided: decided.clone(),
                follow,
            },
        );
        drop(pending);
        // At expiry the approval is dropped (and recorded) even when nobody looks at it again.
        let this = self.clone();
        let expiry = approvals.expiry;
        tokio::spawn(async move {
            tokio::time::sleep(expiry).await;
            let parked = this.sw.inner.approvals.parked().remove(&id);
            if let Some(p) = parked {
                this.audit_approval(&p.decided, Some(&p.request), "expiry", "deny", false);
                this.sw.inner.metrics.approval("expired");
                this.record_unapproved(&p.decided);
            }
        });
        Approval::Answer(Box::new(result))
    }

    /// One audit record of an approval: who answered and how.
    fn audit_approval(
        &self,
        decided: &Decided,
        request: Option<&ApprovalRequest>,
        by: &str,
        answer: &str,
        remember: bool,
    ) {
        let Some(audit) = &self.sw.inner.runner.audit else {
            return;
        };
        audit.record(serde_json::json!({
            "type": "approval",
            "surface": self.sw.inner.runner.surface,
            "session": decided.session,
            "approval_id": request.map(|r| r.id.as_str()),
            "command": decided.asked,
            "question": request.map(|r| r.question.as_str()),
            "rule": request.and_then(|r| r.rule.as_deref()),
            "policy": decided.decision.asked_by,
            "answered_by": by,
            "answer": answer,
            "remember": remember,
        }));
    }
}

/// The result of an asked command that did not run: `denied`, with the reason.
fn refused(decided: &Decided, reason: String) -> ExecuteResult {
    let by = decided
        .decision
        .asked_by
        .clone()
        .unwrap_or_else(|| "a policy".into());
    ExecuteResult {
        success: false,
        denied: true,
        deny_reason: Some(reason),
        notes: vec![crate::Note::new(
            crate::NoteKind::NotRun,
            format!("Not run: {by} asked for approval; deny_reason says what happened."),
        )],
        ..Default::default()
    }
}

/// The result of a call whose approval waits for a later answer.
fn pending_result(decided: &Decided, request: &ApprovalRequest) -> ExecuteResult {
    ExecuteResult {
        success: false,
        command: request.command.clone(),
        pending_approval: Some(Box::new(PendingApproval {
            id: request.id.to_string(),
            question: request.question.clone(),
            command: request.command.clone(),
            expires_in_ms: request.expires_in().as_millis() as u64,
            changes: request.changes.clone(),
        })),
        notes: vec![crate::Note::new(
            crate::NoteKind::Approval,
            format!(
                "Not run yet: {} asked for a person's approval ({}). Approval {} waits for the user's answer for {} \
                 s; nothing runs before it.",
                decided.decision.asked_by.as_deref().unwrap_or("a policy"),
                request.question,
                request.id,
                request.expires_in().as_secs()
            ),
        )],
        ..Default::default()
    }
}

impl crate::SessionHandle {
    /// The approvals waiting for an answer in this session, oldest first.
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        let session = self.name();
        let pending = self.sw.inner.approvals.parked();
        let mut list: Vec<ApprovalRequest> = pending
            .values()
            .filter(|p| p.request.session.as_deref() == session && !p.request.expired())
            .map(|p| p.request.clone())
            .collect();
        list.sort_by_key(|r| r.expires_at);
        list
    }

    /// The commands this session remembers as approved, sorted.
    pub fn remembered_approvals(&self) -> Vec<String> {
        let session = self.name();
        let all = self.sw.inner.approvals.remembered_calls();
        let mut list: Vec<String> = all
            .get(&session.map(str::to_string))
            .map(|calls| calls.values().cloned().collect())
            .unwrap_or_default();
        list.sort();
        list.dedup();
        list
    }

    /// Forgets this session's approvals, remembered and pending: the session ended.
    pub fn end_approvals(&self) {
        let session = self.name();
        let key = session.map(str::to_string);
        let approvals = &self.sw.inner.approvals;
        approvals.remembered_calls().remove(&key);
        approvals.parked().retain(|_, p| p.request.session != key);
    }

    /// Answers this session's pending approval `id` as `by`: yes runs exactly the plan that was asked about and
    /// returns its result, no returns the refusal; another session's id is unknown here.
    pub async fn answer_approval(
        &self,
        id: &str,
        answer: ApprovalAnswer,
        by: &str,
    ) -> Result<ExecuteResult, ToolError> {
        let session = self.name();
        let parked = {
            let mut pending = self.sw.inner.approvals.parked();
            match pending.get(&ApprovalId::from(id)) {
                Some(p) if p.request.session.as_deref() == session => {
                    pending.remove(&ApprovalId::from(id))
                }
                _ => None,
            }
        };
        let Some(parked) = parked else {
            return Err(ToolError::new(
                ToolErrorKind::UnknownApproval,
                format!(
                    "no approval {id:?} is waiting in this session: it was already decided, it expired, or it \
                     belongs to another session. List the pending ones with GET /v1/approvals"
                ),
            ));
        };
        if parked.request.expired() {
            let r = self.expired(&parked.decided, &parked.request, by);
            self.record_unapproved(&parked.decided);
            return Ok(r);
        }
        if matches!(answer, ApprovalAnswer::Unavailable | ApprovalAnswer::Later) {
            return Err(ToolError::invalid(
                "an answer to an approval is approve or deny".to_string(),
            ));
        }
        match self.answered(&parked.decided, &parked.request, by, answer) {
            Approval::Run(note) => {
                self.run_approved(parked.decided, parked.follow, note, Box::new(|_| {}))
                    .await
            }
            Approval::Answer(r) => {
                self.record_unapproved(&parked.decided);
                Ok(*r)
            }
        }
    }
}
