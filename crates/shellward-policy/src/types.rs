//! The host's own policy types: what a request, a plan and an outcome are, independent of any WIT version.
//!
//! Each contract version the host loads has private generated bindings (`bindings::v0_1` … `v0_4`) that are
//! mapped to and from these types, so a change of the WIT is not a change of this crate's API: the types are
//! `#[non_exhaustive]` and grow with constructors (`Request::new`, `Plan::from_request`, `Denial::new`).

/// What happens when a foreground command outlives its timeout. Exhaustive on purpose, as [`Outcome`] and
/// [`Network`] are: a new way to end a command is one every host must handle (or refuse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnTimeout {
    /// Terminate the whole process tree and report it timed out.
    Kill,
    /// Leave it running as a tracked background process.
    Background,
}

/// The network a command reaches, from narrowest to widest: `None`, `Loopback`, `Allow`, `Host`. Exhaustive on
/// purpose: a new kind of network is one every enforcing host must handle (or refuse).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Network {
    /// No network at all.
    None,
    /// Only its own loopback.
    Loopback,
    /// Only these destinations (`host`, `*.domain`, optionally `:port`).
    Allow(Vec<String>),
    /// The host's network.
    Host,
}

impl Network {
    /// Its rank from narrowest (0) to widest (3).
    fn rank(&self) -> u8 {
        match self {
            Network::None => 0,
            Network::Loopback => 1,
            Network::Allow(_) => 2,
            Network::Host => 3,
        }
    }

    /// Whether `self` reaches no more than `ceiling` does (an allow-list is within another only when each of its
    /// entries is one of the other's).
    pub fn within(&self, ceiling: &Network) -> bool {
        match (self, ceiling) {
            (Network::Allow(mine), Network::Allow(theirs)) => {
                mine.iter().all(|m| theirs.contains(m))
            }
            _ => self.rank() <= ceiling.rank(),
        }
    }

    /// Its name as the configuration and the WIT spell it: `none`, `loopback`, `allow`, `host`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Loopback => "loopback",
            Network::Allow(_) => "allow",
            Network::Host => "host",
        }
    }
}

/// What a command may touch (enforced by the host, whatever the program does).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Confinement {
    /// The network it reaches.
    pub network: Network,
    /// `Some(paths)`: it may write only beneath these absolute paths. `None`: writes are not confined.
    pub writable: Option<Vec<String>>,
}

impl Default for Confinement {
    /// Nothing confined: the host's network, writes wherever the user may.
    fn default() -> Self {
        Confinement::unconfined()
    }
}

impl Confinement {
    /// Nothing confined: the host's network, writes wherever the user may.
    pub fn unconfined() -> Confinement {
        Confinement {
            network: Network::Host,
            writable: None,
        }
    }

    /// A confinement with this network and these writable paths.
    pub fn new(network: Network, writable: Option<Vec<String>>) -> Confinement {
        Confinement { network, writable }
    }

    /// Why `self` reaches beyond `ceiling`, or `None` when it stays within it: its network is no wider, and every
    /// path it may write is beneath one the ceiling allows.
    pub fn beyond(&self, ceiling: &Confinement) -> Option<String> {
        if !self.network.within(&ceiling.network) {
            return Some(format!(
                "its plan asks for network \"{}\", beyond the operator's ceiling \"{}\" ([confinement] max_network)",
                describe_network(&self.network),
                describe_network(&ceiling.network)
            ));
        }
        match (&self.writable, &ceiling.writable) {
            (_, None) => None,
            (None, Some(_)) => Some(
                "its plan makes writes unconfined, beyond the operator's ceiling ([confinement] max_writable)".into(),
            ),
            (Some(mine), Some(allowed)) => mine
                .iter()
                .find(|p| !allowed.iter().any(|a| beneath(p, a)))
                .map(|p| {
                    format!(
                        "its plan makes {p:?} writable, which is not beneath any path of the operator's ceiling \
                         ([confinement] max_writable)"
                    )
                }),
        }
    }
}

/// `network` for a message: its name, and an allow-list's entries.
fn describe_network(network: &Network) -> String {
    match network {
        Network::Allow(list) => format!("allow {}", list.join(", ")),
        other => other.as_str().to_string(),
    }
}

/// Whether `path` is `base` or beneath it, comparing whole components (so `/srv2` is not beneath `/srv`).
fn beneath(path: &str, base: &str) -> bool {
    std::path::Path::new(path).starts_with(base)
}

/// A command the agent (or the previous policy in the chain) wants to run. Start from [`Request::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The command text, run with `sh -c`.
    pub command: String,
    /// The working directory asked for; `None` is the host's default.
    pub workdir: Option<String>,
    /// The foreground timeout asked for, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// The caller's (or previous policy's) run-in-background choice.
    pub background: Option<bool>,
    /// What to do at the timeout, if already decided.
    pub on_timeout: Option<OnTimeout>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Caller context (`session-id`, `tool`, …).
    pub context: Vec<(String, String)>,
    /// Keep stdin open for input.
    pub interactive: bool,
    /// Run on a pseudo-terminal.
    pub tty: bool,
    /// What the command may touch: the operator's defaults, or the previous policy's decision.
    pub confinement: Confinement,
    /// The widest confinement a plan may ask for; beyond it is the policy's fault.
    pub ceiling: Confinement,
    /// Paths no command can read (informational).
    pub hidden: Vec<String>,
    /// How long a background start waits for readiness; `None` is the host's default.
    pub startup_wait_ms: Option<u64>,
    /// The operating system (`std::env::consts::OS`).
    pub os: String,
    /// The shell that runs the command text.
    pub shell: String,
}

impl Request {
    /// A request for `command` with nothing else specified: unconfined, with an unconfined ceiling.
    pub fn new(command: impl Into<String>) -> Request {
        Request {
            command: command.into(),
            workdir: None,
            timeout_ms: None,
            background: None,
            on_timeout: None,
            env: Vec::new(),
            context: Vec::new(),
            interactive: false,
            tty: false,
            confinement: Confinement::unconfined(),
            ceiling: Confinement::unconfined(),
            hidden: Vec::new(),
            startup_wait_ms: None,
            os: std::env::consts::OS.to_string(),
            shell: "sh".to_string(),
        }
    }

    /// The request the next policy of a chain sees after `plan`: the plan's decisions, this request's context and
    /// the operator's fixed facts (ceiling, hidden paths, platform).
    pub fn after(&self, plan: &Plan) -> Request {
        Request {
            command: plan.command.clone(),
            workdir: plan.workdir.clone(),
            timeout_ms: plan.timeout_ms,
            background: Some(plan.background),
            on_timeout: Some(plan.on_timeout),
            env: plan.env.clone(),
            context: self.context.clone(),
            interactive: plan.interactive || plan.tty,
            tty: plan.tty,
            confinement: plan.confinement.clone(),
            ceiling: self.ceiling.clone(),
            hidden: self.hidden.clone(),
            startup_wait_ms: plan.startup_wait_ms,
            os: self.os.clone(),
            shell: self.shell.clone(),
        }
    }
}

/// How to run a command: an accepting policy's outcome. Start from [`Plan::from_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// The command to run, possibly rewritten.
    pub command: String,
    /// The working directory; `None` is the host's default.
    pub workdir: Option<String>,
    /// Run as a tracked background process.
    pub background: bool,
    /// The foreground timeout in milliseconds; `None`: no timeout.
    pub timeout_ms: Option<u64>,
    /// What happens at the timeout.
    pub on_timeout: OnTimeout,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Notes for the agent.
    pub notes: Vec<String>,
    /// Keep stdin open for input.
    pub interactive: bool,
    /// Run on a pseudo-terminal.
    pub tty: bool,
    /// What the command may touch.
    pub confinement: Confinement,
    /// How long a background start waits for readiness; `None` is the host's default.
    pub startup_wait_ms: Option<u64>,
    /// Ids of the policy's rules that shaped this plan.
    pub rules: Vec<String>,
}

impl Plan {
    /// The plan that runs `request` as asked (what an empty chain, or a policy that changes nothing, decides).
    pub fn from_request(request: &Request) -> Plan {
        Plan {
            command: request.command.clone(),
            workdir: request.workdir.clone(),
            background: request.background.unwrap_or(false),
            timeout_ms: request.timeout_ms,
            on_timeout: request.on_timeout.unwrap_or(OnTimeout::Kill),
            env: request.env.clone(),
            notes: Vec::new(),
            interactive: request.interactive || request.tty,
            tty: request.tty,
            confinement: request.confinement.clone(),
            startup_wait_ms: request.startup_wait_ms,
            rules: Vec::new(),
        }
    }
}

/// One of a policy's rules, as its `rules` export lists them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Rule {
    /// Its id, as plans and denials name it.
    pub id: String,
    /// One line saying what it does.
    pub summary: String,
}

impl Rule {
    /// A rule with this id and summary.
    pub fn new(id: impl Into<String>, summary: impl Into<String>) -> Rule {
        Rule {
            id: id.into(),
            summary: summary.into(),
        }
    }
}

/// Why a command is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Denial {
    /// The reason shown to the agent.
    pub reason: String,
    /// The id of the rule that refused it, when the policy names its rules.
    pub rule: Option<String>,
}

impl From<&str> for Denial {
    fn from(reason: &str) -> Denial {
        Denial::new(reason)
    }
}

impl From<String> for Denial {
    fn from(reason: String) -> Denial {
        Denial::new(reason)
    }
}

impl Denial {
    /// A denial for `reason`, naming no rule.
    pub fn new(reason: impl Into<String>) -> Denial {
        Denial {
            reason: reason.into(),
            rule: None,
        }
    }

    /// This denial, naming the rule that refused.
    pub fn with_rule(mut self, rule: impl Into<String>) -> Denial {
        self.rule = Some(rule.into());
        self
    }
}

impl std::fmt::Display for Denial {
    /// The reason, as the agent is shown it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A command that runs only once a person approves it: the plan that would run, and the question to show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ask {
    /// What runs once approved: exactly this plan.
    pub plan: Plan,
    /// The question for the person: what will happen and why it needs a yes.
    pub question: String,
    /// The id of the rule that asked, when the policy names its rules.
    pub rule: Option<String>,
}

impl Ask {
    /// An ask to run `plan` once a person answers yes to `question`, naming no rule.
    pub fn new(plan: Plan, question: impl Into<String>) -> Ask {
        Ask {
            plan,
            question: question.into(),
            rule: None,
        }
    }

    /// This ask, naming the rule that asked.
    pub fn with_rule(mut self, rule: impl Into<String>) -> Ask {
        self.rule = Some(rule.into());
        self
    }
}

/// A policy's answer to a request. Exhaustive on purpose: a new kind of answer is one every caller must handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Run the command according to this plan.
    Run(Plan),
    /// Do not run it.
    Deny(Denial),
    /// Run the plan only once a person approves it (since contract 0.4).
    Ask(Ask),
}

impl Outcome {
    /// A deny for `reason`, naming no rule.
    pub fn deny(reason: impl Into<String>) -> Outcome {
        Outcome::Deny(Denial::new(reason))
    }

    /// The plan, for a run (not for an ask: that plan runs only once approved).
    pub fn plan(&self) -> Option<&Plan> {
        match self {
            Outcome::Run(p) => Some(p),
            Outcome::Deny(_) | Outcome::Ask(_) => None,
        }
    }

    /// The plan that runs now or once approved: a run's or an ask's.
    pub fn planned(&self) -> Option<&Plan> {
        match self {
            Outcome::Run(p) | Outcome::Ask(Ask { plan: p, .. }) => Some(p),
            Outcome::Deny(_) => None,
        }
    }

    /// The denial, for a deny.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            Outcome::Deny(d) => Some(d),
            Outcome::Run(_) | Outcome::Ask(_) => None,
        }
    }

    /// The ask, for an ask.
    pub fn ask(&self) -> Option<&Ask> {
        match self {
            Outcome::Ask(a) => Some(a),
            Outcome::Run(_) | Outcome::Deny(_) => None,
        }
    }

    /// The kind of outcome as text: `run`, `deny` or `ask`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Run(_) => "run",
            Outcome::Deny(_) => "deny",
            Outcome::Ask(_) => "ask",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_ceiling_orders_from_none_to_host() {
        use Network as N;
        assert!(N::None.within(&N::Loopback));
        assert!(N::Loopback.within(&N::Host));
        assert!(!N::Host.within(&N::Loopback));
        assert!(N::Allow(vec!["pypi.org".into()]).within(&N::Host));
        assert!(!N::Allow(vec!["pypi.org".into()]).within(&N::Loopback));
        let pypi = N::Allow(vec!["pypi.org".into()]);
        assert!(pypi.within(&N::Allow(vec!["pypi.org".into(), "x.org".into()])));
        assert!(!N::Allow(vec!["evil.org".into()]).within(&pypi));
    }

    #[test]
    fn writable_paths_must_be_beneath_the_ceiling() {
        let ceiling = Confinement::new(Network::Host, Some(vec!["/srv".into(), "/tmp".into()]));
        let ok = Confinement::new(Network::None, Some(vec!["/srv/app".into()]));
        assert_eq!(ok.beyond(&ceiling), None);
        let sibling = Confinement::new(Network::Host, Some(vec!["/srv2".into()]));
        assert!(sibling.beyond(&ceiling).unwrap().contains("/srv2"));
        let any = Confinement::new(Network::Host, None);
        assert!(any.beyond(&ceiling).unwrap().contains("unconfined"));
        assert_eq!(any.beyond(&Confinement::unconfined()), None);
        let wide = Confinement::new(Network::Host, Some(vec!["/srv".into()]));
        let narrow_ceiling = Confinement::new(Network::Loopback, None);
        assert!(
            wide.beyond(&narrow_ceiling)
                .unwrap()
                .contains("max_network")
        );
    }
}
