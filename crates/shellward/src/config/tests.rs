//! Tests of the configuration file: parsing, problems with their key paths, loading.

use super::*;
use shellward_exec::ContainmentPreference;
use shellward_policy::InstanceMode;

fn problems(text: &str) -> Vec<String> {
    match Config::parse(text, Path::new("/nonexistent-base")) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
    }
}

#[test]
fn empty_file_is_the_defaults() {
    let c = Config::parse("", Path::new(".")).unwrap();
    // The built-in chain: default, then guard.
    assert_eq!(
        c.policies,
        vec![PolicyEntry::default_policy(), PolicyEntry::guard_policy()]
    );
    let g = Config::parse("[[policy]]\nbuiltin = \"guard\"\n", Path::new(".")).unwrap();
    assert_eq!(g.policies, vec![PolicyEntry::guard_policy()]);
    assert_eq!(c.tools, ToolLimits::default());
    assert_eq!(c.executor.shell, vec!["sh", "-c"]);
}

#[test]
fn a_chain_loads_in_its_configured_order_with_every_failure_reported_in_order() {
    let engine = PolicyEngine::new(SandboxConfig::default().pooling(false)).unwrap();
    // More entries than cores: loaded concurrently, each must still land in its own place.
    let chain = Config::parse(
        "[[policy]]\nbuiltin = \"guard\"\n[[policy]]\nbuiltin = \"default\"\n[[policy]]\nbuiltin = \"guard\"\n\
         [[policy]]\nbuiltin = \"default\"\nsettings = { default_timeout = \"7s\" }\n[[policy]]\nbuiltin = \"guard\"\n",
        Path::new("."),
    )
    .unwrap()
    .load_chain(&engine)
    .unwrap();
    let names: Vec<&str> = chain.policies().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["guard", "default", "guard", "default", "guard"]);
    assert!(
        chain.policies()[3].settings().contains("7s"),
        "{:?}",
        chain.policies()[3].settings()
    );
    let dir = tempfile::tempdir().unwrap();
    for broken in ["first-broken.wasm", "last-broken.wasm"] {
        std::fs::write(dir.path().join(broken), b"not a component").unwrap();
    }
    let err = Config::parse(
        "[[policy]]\npath = \"first-broken.wasm\"\n[[policy]]\nbuiltin = \"default\"\n\
         [[policy]]\nbuiltin = \"default\"\nsettings = { default_timeout = \"soon\" }\n\
         [[policy]]\npath = \"last-broken.wasm\"\n",
        dir.path(),
    )
    .unwrap()
    .load_chain(&engine)
    .unwrap_err();
    let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["policy[0]", "policy[2]", "policy[3]"], "{err}");
    assert!(
        err.problems[0].message.contains("first-broken.wasm"),
        "{err}"
    );
    assert!(
        err.problems[2].message.contains("last-broken.wasm"),
        "{err}"
    );
}

#[test]
fn every_problem_is_reported_with_its_key() {
    let p = problems(
        r#"
        colour = "blue"
        [[policy]]
        path = "missing.wasm"
        [[policy]]
        builtin = "nope"
        [[policy]]
        fail_open = "yes"
        [sandbox]
        deadline = "fast"
        memory_mib = 0
        [executor]
        grace = "-1s"
        max_running = 0
        shell = []
        bogus = 1
        [env]
        GOOD = "x"
        BAD = 3
        [tools]
        max_command_bytes = 1048576
        "#,
    );
    let keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
    for want in [
        "policy[0].path",
        "policy[1].builtin",
        "policy[2].fail_open",
        "policy[2]",
        "sandbox.deadline",
        "sandbox.memory_mib",
        "executor.shell",
        "executor.grace",
        "executor.max_running",
        "executor.bogus",
        "env.BAD",
        "tools.max_command_bytes",
        "colour",
    ] {
        assert!(keys.contains(&want), "no problem for {want} in {p:#?}");
    }
    assert_eq!(p.len(), 13, "{p:#?}");
}

/// A duration past its setting's bound (a grace or drain that would hold a shutdown for years) is refused with
/// its key path and the bound; one at the bound is taken.
#[test]
fn durations_past_their_bound_are_refused_with_the_key_and_the_limit() {
    let p = problems(
        r#"
        [sandbox]
        deadline = "2m"
        [executor]
        grace = "999999999999h"
        drain = "11m"
        retention = "800h"
        session_idle = "25h"
        [tools]
        max_wait = "2h"
        [oci]
        deadline = "2h"
        connect_timeout = "6m"
        max_component_bytes = 2147483648
        "#,
    );
    let mut keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "executor.drain",
            "executor.grace",
            "executor.retention",
            "executor.session_idle",
            "oci.connect_timeout",
            "oci.deadline",
            "oci.max_component_bytes",
            "sandbox.deadline",
            "tools.max_wait"
        ],
        "{p:#?}"
    );
    let grace = p.iter().find(|s| s.starts_with("executor.grace")).unwrap();
    assert!(
        grace.contains("limit of 10m") && grace.contains("give at most 10m"),
        "{grace}"
    );
    let c = Config::parse(
        "[executor]\ngrace = \"10m\"\nretention = \"720h\"\n",
        Path::new("/"),
    )
    .unwrap();
    assert_eq!(c.executor.grace, Duration::from_secs(600));
    let c = Config::parse(
        "[oci]\ndeadline = \"30s\"\nmax_manifest_bytes = 4096\nmin_rate = 0\n",
        Path::new("/"),
    )
    .unwrap();
    assert_eq!(c.oci.deadline, Duration::from_secs(30));
    assert_eq!(c.oci.max_manifest_bytes, 4096);
    assert_eq!(c.oci.min_rate, 0);
    assert_eq!(c.oci.max_component_bytes, 64 << 20);
}

#[test]
fn confinement_keys_name_each_bad_item_and_host_files_include_the_config() {
    let p = problems(
        r#"
        [executor]
        keep_capabilities = ["sys_ptrace", "CAP_NOPE", 3]
        read_only_paths = "secrets"
        "#,
    );
    let mut keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "executor.keep_capabilities[1]",
            "executor.keep_capabilities[2]",
            "executor.read_only_paths"
        ],
        "{p:#?}"
    );
    assert!(
        p[1].contains("\"CAP_SYS_ADMIN\" or \"sys_admin\""),
        "{p:#?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shellward.toml");
    std::fs::write(
        &file,
        "[executor]\nkeep_capabilities = [\"sys_ptrace\"]\nread_only_paths = [\"secrets\"]\n",
    )
    .unwrap();
    let c = Config::load(&file).unwrap();
    assert_eq!(c.executor.keep_capabilities, ["sys_ptrace"]);
    assert_eq!(c.executor.read_only_paths, [dir.path().join("secrets")]);
    let files = c.host_files();
    assert!(files.contains(&file.canonicalize().unwrap()), "{files:?}");
    assert!(files.iter().all(|f| f.is_absolute()), "{files:?}");
    assert!(
        !c.host_secrets().contains(&file.canonicalize().unwrap()),
        "a config without tokens stays readable"
    );
    std::fs::write(
        &file,
        "[[auth]]\ntoken = \"a-long-enough-token-0123456789\"\nsessions = [\"a\"]\n",
    )
    .unwrap();
    let c = Config::load(&file).unwrap();
    assert!(
        c.host_secrets().contains(&file.canonicalize().unwrap()),
        "a config holding tokens is hidden: {:?}",
        c.host_secrets()
    );
}

#[test]
fn values_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.wasm"), b"").unwrap();
    let c = Config::parse(
        r#"
        [[policy]]
        path = "p.wasm"
        fail_open = true
        [policy.settings]
        default_timeout = "30s"
        promote_patterns = ["a b"]
        [[policy]]
        builtin = "default"
        [sandbox]
        deadline = "250ms"
        memory_mib = 32
        instance_mode = "fresh"
        cache = false
        [executor]
        shell = ["bash", "-c"]
        grace = "500ms"
        max_running = 3
        output_head_bytes = 100
        containment = "process-group"
        max_running_per_session = 2
        pid_namespace = false
        max_processes = 0
        max_file_size_bytes = 1073741824
        max_retained_per_session = 7
        max_log_bytes = 1048576
        [env]
        PAGER = "less"
        inherit = "core"
        allow = ["MY_API_KEY"]
        exclude = ["LC_*"]
        [env.set]
        CI = "1"
        [tools]
        default_wait = "0s"
        list_limit = 5
        "#,
        dir.path(),
    )
    .unwrap();
    assert_eq!(c.policies.len(), 2);
    assert_eq!(
        c.policies[0].source,
        PolicySource::File(dir.path().join("p.wasm"))
    );
    assert!(c.policies[0].fail_open);
    let settings: serde_json::Value = serde_json::from_str(&c.policies[0].settings).unwrap();
    assert_eq!(settings["default_timeout"], "30s");
    assert_eq!(settings["promote_patterns"][0], "a b");
    assert_eq!(c.policies[1].source, PolicySource::Default);
    assert_eq!(c.sandbox.deadline, Duration::from_millis(250));
    assert_eq!(c.sandbox.memory_limit, 32 << 20);
    assert_eq!(c.sandbox.instance_mode, InstanceMode::Fresh);
    assert_eq!(c.sandbox.cache_dir, None);
    assert_eq!(c.executor.shell, vec!["bash", "-c"]);
    assert_eq!(c.executor.grace, Duration::from_millis(500));
    assert_eq!(c.executor.max_running, 3);
    assert_eq!(c.executor.output.head, 100);
    assert_eq!(c.executor.containment, ContainmentPreference::ProcessGroup);
    assert_eq!(c.executor.max_running_per_session, 2);
    assert!(!c.executor.pid_namespace);
    assert_eq!(c.executor.limits.max_processes, None);
    assert_eq!(c.executor.limits.file_size_bytes, Some(1 << 30));
    assert_eq!(c.executor.max_retained_per_session, 7);
    assert_eq!(c.executor.max_log_bytes, 1 << 20);
    assert_eq!(c.executor.env.inherit, shellward_exec::Inherit::Core);
    assert_eq!(c.executor.env.allow, ["MY_API_KEY"]);
    assert_eq!(c.executor.env.exclude, ["LC_*"]);
    let env: std::collections::HashMap<_, _> = c.executor.env.set.iter().cloned().collect();
    assert_eq!(env["PAGER"], "less");
    assert_eq!(env["CI"], "1");
    assert_eq!(env["TERM"], "dumb");
    assert_eq!(c.tools.default_wait, Duration::ZERO);
    assert_eq!(c.tools.list_limit, 5);
}

#[test]
fn env_policy_problems_name_their_keys() {
    let p = problems(
        r#"
        [env]
        inherit = "some"
        allow = "MY_KEY"
        exclude = ["", "A=B", 3]
        NUMBER = 1
        [env.set]
        "BAD=NAME" = "x"
        "#,
    );
    for key in [
        "env.inherit",
        "env.allow",
        "env.exclude[0]",
        "env.exclude[1]",
        "env.exclude[2]",
        "env.NUMBER",
        "env.set.BAD=NAME",
    ] {
        assert!(p.iter().any(|m| m.contains(key)), "{key} not in {p:?}");
    }
}

#[test]
fn auth_entries_are_parsed_and_checked() {
    let c = Config::parse(
        "[[auth]]\ntoken = \"tok-a\"\nsessions = [\"a\", \"a2\"]\n",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(c.auth[0].token, "tok-a");
    assert_eq!(c.auth[0].sessions, ["a", "a2"]);
    assert!(
        !format!("{:?}", c.auth[0]).contains("tok-a"),
        "the token is not printed"
    );
    let p = problems(
        r#"
        [[auth]]
        token = " padded"
        sessions = ["ok", "two words"]
        [[auth]]
        token_env = "SHELLWARD_TEST_SURELY_UNSET_VAR"
        sessions = []
        [[auth]]
        sessions = ["x"]
        "#,
    );
    for key in [
        "auth[0].token",
        "auth[0].sessions",
        "auth[1].token_env",
        "auth[1].sessions",
        "auth[2]",
    ] {
        assert!(p.iter().any(|m| m.contains(key)), "{key} not in {p:?}");
    }
}

#[test]
fn an_empty_chain_is_allowed() {
    let c = Config::parse("policy = []", Path::new(".")).unwrap();
    assert!(c.policies.is_empty());
}

#[test]
fn invalid_toml_is_one_clear_problem() {
    let p = problems("[executor\n");
    assert_eq!(p.len(), 1);
    assert!(p[0].contains("not valid TOML"), "{p:?}");
}

#[test]
fn drop_in_policies_follow_the_entries_in_file_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("policies.d");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("50-b.wasm"), b"").unwrap();
    std::fs::write(d.join("10-a.wasm"), b"").unwrap();
    std::fs::write(d.join("notes.txt"), b"").unwrap();
    std::fs::write(
        d.join("10-a.toml"),
        "fail_open = true\n[settings]\ndeny = [\"x\"]\n",
    )
    .unwrap();
    let c = Config::parse("[policies]\ndir = \"policies.d\"\n", dir.path()).unwrap();
    let entries = c.policy_entries().unwrap();
    let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "policy[0]",
            "policy[1]",
            "policies.dir/10-a.wasm",
            "policies.dir/50-b.wasm"
        ]
    );
    assert!(entries[2].1.fail_open);
    assert_eq!(entries[2].1.settings, r#"{"deny":["x"]}"#);
    assert!(!entries[3].1.fail_open);
    // A bad NAME.toml is reported with its file.
    std::fs::write(d.join("50-b.toml"), "path = \"elsewhere.wasm\"\n").unwrap();
    let e = c.policy_entries().unwrap_err();
    assert_eq!(e.problems[0].key, "policies.dir/50-b.toml");
    assert!(e.problems[0].message.contains("unknown key `path`"), "{e}");
    // A missing directory is a problem when the file is read.
    let e = Config::parse("[policies]\ndir = \"nope\"\n", dir.path()).unwrap_err();
    assert_eq!(e.problems[0].key, "policies.dir");
}

#[test]
fn the_confinement_ceiling_is_read_and_must_hold_the_defaults() {
    let c = Config::parse(
        "[confinement]\nnetwork = \"none\"\nmax_network = \"host\"\nwritable = [\"$WORKDIR\"]\n\
         max_writable = [\"$WORKDIR\", \"/srv\"]\n",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(
        c.confinement.max_network,
        Some(shellward_exec::Network::Host)
    );
    assert_eq!(
        c.confinement.max_writable,
        Some(Some(vec!["$WORKDIR".to_string(), "/srv".to_string()]))
    );
    let c = Config::parse(
        "[confinement]\nnetwork = { allow = [\"pypi.org\", \"*.npmjs.org:443\"] }\n\
         proxy_hosts = { \"registry.internal\" = \"10.0.0.5\" }\n",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(c.confinement.network, shellward_exec::Network::Allow);
    assert_eq!(c.confinement.allow, ["pypi.org", "*.npmjs.org:443"]);
    assert_eq!(
        c.confinement.proxy_hosts["registry.internal"],
        vec!["10.0.0.5".parse::<std::net::IpAddr>().unwrap()]
    );
    let c = Config::parse("[confinement]\nmax_writable = \"any\"\n", Path::new(".")).unwrap();
    assert_eq!(c.confinement.max_writable, Some(None));
    assert_eq!(Config::default().confinement.max_network, None);
    assert_eq!(
        Config::default().confinement.unenforceable,
        shellward_exec::Unenforceable::Refuse
    );
    let c = Config::parse("[confinement]\nunenforceable = \"run\"\n", Path::new(".")).unwrap();
    assert_eq!(
        c.confinement.unenforceable,
        shellward_exec::Unenforceable::Run
    );
    for (text, key, needle) in [
        (
            "unenforceable = \"sometimes\"",
            "confinement.unenforceable",
            "\"refuse\"",
        ),
        (
            "network = \"host\"\nmax_network = \"loopback\"",
            "confinement.max_network",
            "narrower",
        ),
        (
            "writable = [\"$WORKDIR\", \"/tmp\"]\nmax_writable = [\"$WORKDIR\"]",
            "confinement.max_writable",
            "/tmp",
        ),
        (
            "writable = \"any\"\nmax_writable = [\"/srv\"]",
            "confinement.max_writable",
            "any",
        ),
        (
            "max_network = \"wide\"",
            "confinement.max_network",
            "not a network",
        ),
        (
            "network = { allow = [\"not a host\"] }",
            "confinement.network",
            "destination",
        ),
        (
            "network = { deny = [\"x.org\"] }",
            "confinement.network",
            "allow =",
        ),
        (
            "network = { allow = [\"a.org\", \"b.org\"] }\nmax_network = { allow = [\"a.org\"] }",
            "confinement.max_network",
            "narrower",
        ),
        (
            "proxy_hosts = { \"x.test\" = \"not-an-ip\" }",
            "confinement.proxy_hosts.x.test",
            "IP address",
        ),
    ] {
        let p = problems(&format!("[confinement]\n{text}\n"));
        assert!(
            p.iter().any(|s| s.starts_with(key) && s.contains(needle)),
            "{text}: {p:#?}"
        );
    }
}

#[test]
fn on_cancel_takes_stop_or_background_and_says_so_otherwise() {
    let c = Config::parse("[tools]\non_cancel = \"background\"\n", Path::new("/")).unwrap();
    assert_eq!(c.tools.on_cancel, crate::OnCancel::Background);
    assert_eq!(Config::default().tools.on_cancel, crate::OnCancel::Stop);
    let p = problems("[tools]\non_cancel = \"pause\"\n");
    assert!(
        p.iter().any(|p| p.contains("tools.on_cancel")
            && p.contains("\"stop\"")
            && p.contains("\"background\"")),
        "{p:?}"
    );
}

#[test]
fn approvals_take_durations_of_a_second_or_more_and_a_reviewer_program_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("approved.txt"), "git push --force\n").unwrap();
    let c = Config::parse(
        "[approvals]\nexpiry = \"90s\"\nclient = false\nallow_file = \"approved.txt\"\n[approvals.reviewer]\n\
         command = [\"python3\", \"/etc/review.py\"]\ntimeout = \"2s\"\n",
        dir.path(),
    )
    .unwrap();
    assert_eq!(c.approvals.expiry, Duration::from_secs(90));
    assert!(!c.approvals.client);
    assert_eq!(
        c.approvals.allow_file,
        Some(dir.path().join("approved.txt"))
    );
    let r = c.approvals.reviewer.unwrap();
    assert_eq!(
        (r.command[0].as_str(), r.timeout),
        ("python3", Duration::from_secs(2))
    );
    // The defaults: five minutes, the client asked, nobody else.
    let d = Config::default().approvals;
    assert_eq!(
        (d.expiry, d.client, d.reviewer),
        (Duration::from_secs(300), true, None)
    );
    for (text, key, says) in [
        (
            "[approvals]\nexpiry = \"500ms\"\n",
            "approvals.expiry",
            "1s or more",
        ),
        ("[approvals]\nexpiry = \"soon\"\n", "approvals.expiry", ""),
        (
            "[approvals]\nexpiry = \"48h\"\n",
            "approvals.expiry",
            "limit",
        ),
        (
            "[approvals]\nclient = \"yes\"\n",
            "approvals.client",
            "true or false",
        ),
        ("[approvals]\nwho = 1\n", "approvals.who", "unknown key"),
        (
            "[approvals]\nallow_file = \"missing.txt\"\n",
            "approvals.allow_file",
            "not a readable file",
        ),
        (
            "[approvals.reviewer]\ntimeout = \"5s\"\n",
            "approvals.reviewer.command",
            "missing",
        ),
        (
            "[approvals.reviewer]\ncommand = []\n",
            "approvals.reviewer.command",
            "non-empty",
        ),
        (
            "[approvals.reviewer]\ncommand = \"review\"\n",
            "approvals.reviewer.command",
            "non-empty",
        ),
        (
            "[approvals.reviewer]\ncommand = [\"./nope\"]\n",
            "approvals.reviewer.command",
            "does not exist",
        ),
        (
            "[approvals.reviewer]\ncommand = [\"r\"]\ntimeout = \"0s\"\n",
            "approvals.reviewer.timeout",
            "",
        ),
    ] {
        let p = problems(text);
        assert!(
            p.iter()
                .any(|line| line.starts_with(key) && line.contains(says)),
            "{text}: {p:?}"
        );
    }
}

#[test]
fn unix_sockets_take_paths_and_variables_and_name_a_bad_entry() {
    let c = Config::parse(
        "[confinement]\nnetwork = \"none\"\nunix_sockets = [\"$SSH_AUTH_SOCK\", \"~/agent.sock\", \"/run/a.sock\"]\n",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(
        c.confinement.unix_sockets,
        ["$SSH_AUTH_SOCK", "~/agent.sock", "/run/a.sock"]
    );
    // Expanded per command: a variable that is unset names nothing, `~/` is the home directory.
    let plan = c.confinement.for_command(Path::new("/w"));
    assert!(
        plan.unix_sockets.contains(&PathBuf::from("/run/a.sock")),
        "{plan:?}"
    );
    assert_eq!(
        plan.unix_sockets.len(),
        1 + usize::from(dirs::home_dir().is_some())
            + usize::from(
                std::env::var_os("SSH_AUTH_SOCK").is_some_and(|v| Path::new(&v).is_absolute())
            ),
        "{plan:?}"
    );
    let p = problems("[confinement]\nunix_sockets = [\"agent.sock\", \"$\", 3]\n");
    let keys: Vec<&str> = p.iter().map(|s| s.split(':').next().unwrap()).collect();
    assert!(keys.contains(&"confinement.unix_sockets[0]"), "{p:#?}");
    assert!(keys.contains(&"confinement.unix_sockets[1]"), "{p:#?}");
    assert!(
        p.iter().any(|s| s.contains("not an absolute path")),
        "{p:#?}"
    );
    assert_eq!(
        Config::default().confinement.unix_sockets,
        Vec::<String>::new()
    );
}

#[test]
fn watching_writes_is_on_by_default_and_may_be_turned_off() {
    assert!(Config::default().executor.watch_writes);
    let c = Config::parse("[confinement]\nwatch_writes = false\n", Path::new(".")).unwrap();
    assert!(!c.executor.watch_writes);
    let p = problems("[confinement]\nwatch_writes = \"no\"\n");
    assert!(
        p.iter().any(|s| s.starts_with("confinement.watch_writes")),
        "{p:#?}"
    );
}
