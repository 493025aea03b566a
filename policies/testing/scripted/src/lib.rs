//! A test policy whose behaviour is scripted, used by the host's tests. Not for use.
//!
//! Settings (plain text, not JSON): `reject` (configure fails), `configure-loop`, `configure-trap`, `append:TEXT`
//! (append TEXT to the command), `deny:REASON` (deny everything), `ask:QUESTION` (ask QUESTION about every echoed
//! command, rule `scripted-ask`), `kill` (on-timeout kill), `no-interactive` (turn
//! `interactive` and `tty` off), anything else (echo).
//!
//! Commands trigger faults: `loop` (infinite loop), `alloc` (allocate without bound), `trap` (panic), `stack`
//! (unbounded recursion), `sleep` (blocking sleep through WASI), `log` (log a message through the host). Commands
//! that return output the host must refuse: `huge-note`, `huge-deny`, `huge-command` (10 MiB each), `bad-env` (a
//! variable named `A=B`), `workdir:PATH` (runs `true` in PATH). Commands that set what 0.3 added: `net:MODE`
//! (`none`, `loopback`, `host`, or `allow=a,b`), `write:PATHS` (comma-separated, or `any`), `wait:MS` (start-up wait),
//! `rule:ID` (the plan names rule ID); each runs `true`. Any other command is echoed back as the plan, with a note
//! `calls=N` counting evaluations in this instance. `rules` lists `scripted-deny` and `echo` (with the setting
//! `bad-rules`: an invalid id).

#[cfg(target_arch = "wasm32")]
mod component {
    use std::cell::{Cell, RefCell};

    wit_bindgen::generate!({ path: "../../../wit/v0.4", world: "policy-world" });

    use exports::shellward::policy::policy::Guest;
    use shellward::policy::host::{Level, log};
    use shellward::policy::types::{
        Confinement, Denial, Network, OnTimeout, Outcome, Plan, Question, Request, Rule,
    };

    thread_local! {
        static SETTINGS: RefCell<String> = const { RefCell::new(String::new()) };
        static CALLS: Cell<u64> = const { Cell::new(0) };
    }

    /// Recursion whose frames live on the wasm value stack (no address-taken locals), so it overflows the
    /// engine's native stack limit rather than the shadow stack in linear memory.
    #[inline(never)]
    fn recurse(n: u64, a: u64, b: u64, c: u64) -> u64 {
        if n == u64::MAX {
            return a;
        }
        let r = recurse(
            n.wrapping_add(1),
            b ^ n,
            c.rotate_left(7),
            a.wrapping_mul(31),
        );
        r.wrapping_mul(a | 1) ^ b.wrapping_add(c)
    }

    struct Scripted;

    impl Guest for Scripted {
        fn configure(settings: String) -> Result<(), String> {
            match settings.as_str() {
                "reject" => {
                    return Err("setting `mode`: \"reject\" is refused on purpose".to_string());
                }
                "configure-loop" => loop {
                    std::hint::black_box(());
                },
                "configure-trap" => panic!("configure trapped on purpose"),
                _ => {}
            }
            SETTINGS.with(|s| *s.borrow_mut() = settings);
            Ok(())
        }

        fn rules() -> Vec<Rule> {
            let mut list = vec![
                Rule {
                    id: "scripted-deny".into(),
                    summary: "denies everything (setting deny:REASON)".into(),
                },
                Rule {
                    id: "scripted-ask".into(),
                    summary: "asks about every command (setting ask:QUESTION)".into(),
                },
                Rule {
                    id: "echo".into(),
                    summary: "runs the command as asked".into(),
                },
            ];
            if SETTINGS.with(|s| *s.borrow() == "bad-rules") {
                list.push(Rule {
                    id: "not a valid id".into(),
                    summary: "invalid on purpose".into(),
                });
            }
            list
        }

        fn evaluate(request: Request) -> Outcome {
            let calls = CALLS.with(|c| {
                c.set(c.get() + 1);
                c.get()
            });
            match request.command.as_str() {
                "loop" => loop {
                    std::hint::black_box(());
                },
                "alloc" => {
                    let mut hoard: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hoard.push(vec![1u8; 1 << 20]);
                        std::hint::black_box(&hoard);
                    }
                }
                "trap" => panic!("evaluate trapped on purpose"),
                "stack" => {
                    let n = recurse(0, 1, 2, 3);
                    return Outcome::Deny(Denial {
                        reason: format!("unreachable {n}"),
                        rule: None,
                    });
                }
                "sleep" => std::thread::sleep(std::time::Duration::from_secs(3600)),
                "log" => log(Level::Warn, "hello from the scripted policy"),
                "huge-deny" => {
                    return Outcome::Deny(Denial {
                        reason: "d".repeat(10 << 20),
                        rule: None,
                    });
                }
                _ => {}
            }
            let huge = |text: &str| Plan {
                command: text.to_string(),
                workdir: None,
                background: false,
                timeout_ms: None,
                on_timeout: OnTimeout::Kill,
                env: Vec::new(),
                notes: Vec::new(),
                interactive: false,
                tty: false,
                confinement: request.confinement.clone(),
                startup_wait_ms: request.startup_wait_ms,
                rules: Vec::new(),
            };
            match request.command.as_str() {
                "huge-note" => {
                    let mut p = huge("true");
                    p.notes = vec!["n".repeat(10 << 20)];
                    return Outcome::Run(p);
                }
                "huge-command" => return Outcome::Run(huge(&"c".repeat(10 << 20))),
                "bad-env" => {
                    let mut p = huge("true");
                    p.env = vec![("A=B".into(), "1".into())];
                    return Outcome::Run(p);
                }
                other => {
                    if let Some(dir) = other.strip_prefix("workdir:") {
                        let mut p = huge("true");
                        p.workdir = Some(dir.to_string());
                        return Outcome::Run(p);
                    }
                    if let Some(mode) = other.strip_prefix("net:") {
                        let mut p = huge("true");
                        p.confinement = Confinement {
                            network: match mode {
                                "none" => Network::None,
                                "loopback" => Network::Loopback,
                                "host" => Network::Host,
                                list => Network::Allow(
                                    list.trim_start_matches("allow=")
                                        .split(',')
                                        .map(str::to_string)
                                        .collect(),
                                ),
                            },
                            writable: request.confinement.writable.clone(),
                        };
                        return Outcome::Run(p);
                    }
                    if let Some(paths) = other.strip_prefix("write:") {
                        let mut p = huge("true");
                        p.confinement.writable = (paths != "any")
                            .then(|| paths.split(',').map(str::to_string).collect());
                        return Outcome::Run(p);
                    }
                    if let Some(ms) = other.strip_prefix("wait:") {
                        let mut p = huge("true");
                        p.startup_wait_ms = ms.parse().ok();
                        return Outcome::Run(p);
                    }
                    if let Some(id) = other.strip_prefix("rule:") {
                        let mut p = huge("true");
                        p.rules = vec![id.to_string()];
                        return Outcome::Run(p);
                    }
                }
            }
            let settings = SETTINGS.with(|s| s.borrow().clone());
            if let Some(reason) = settings.strip_prefix("deny:") {
                return Outcome::Deny(Denial {
                    reason: reason.to_string(),
                    rule: Some("scripted-deny".into()),
                });
            }
            let mut command = request.command;
            if let Some(suffix) = settings.strip_prefix("append:") {
                command.push_str(suffix);
            }
            let on_timeout = if settings == "kill" {
                OnTimeout::Kill
            } else {
                request.on_timeout.unwrap_or(OnTimeout::Background)
            };
            let plan = Plan {
                command,
                workdir: request.workdir,
                background: request.background.unwrap_or(false),
                timeout_ms: request.timeout_ms,
                on_timeout,
                env: request.env,
                notes: vec![format!("calls={calls}")],
                // `no-interactive`: a policy refusing stdin and terminals (the plan turns them off).
                interactive: request.interactive && settings != "no-interactive",
                tty: request.tty && settings != "no-interactive",
                confinement: request.confinement,
                startup_wait_ms: request.startup_wait_ms,
                rules: vec!["echo".into()],
            };
            match settings.strip_prefix("ask:") {
                Some(question) => Outcome::Ask(Question {
                    plan,
                    text: question.to_string(),
                    rule: Some("scripted-ask".into()),
                }),
                None => Outcome::Run(plan),
            }
        }
    }

    export!(Scripted);
}
