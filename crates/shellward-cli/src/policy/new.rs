//! `shellward policy new NAME [--lang rust|python]`: scaffold a policy that builds and passes its own case file.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The WIT contract this host implements, copied into every scaffold so it builds on its own.
const WIT: &str = include_str!("../../wit/v0.4/policy.wit");
/// The kit's Python shell reader (`crates/shellward-kit/python/`), copied beside a Python scaffold's `app.py`.
const PYTHON_READER: &str = include_str!("../../shellward_reader.py");

/// `shellward-kit`'s sources, copied into every Rust scaffold (`shellward-kit/`) so the scaffold reads commands the
/// way the shipped policies do (wrappers and nested shells seen through) and builds offline, from this binary alone.
const KIT_FILES: &[(&str, &str)] = &[
    ("src/lib.rs", include_str!("../../kit-src/lib.rs")),
    ("src/alloc.rs", include_str!("../../kit-src/alloc.rs")),
    ("src/confine.rs", include_str!("../../kit-src/confine.rs")),
    ("src/duration.rs", include_str!("../../kit-src/duration.rs")),
    (
        "src/effective.rs",
        include_str!("../../kit-src/effective.rs"),
    ),
    (
        "src/effective/reader.rs",
        include_str!("../../kit-src/effective/reader.rs"),
    ),
    (
        "src/effective/tests.rs",
        include_str!("../../kit-src/effective/tests.rs"),
    ),
    ("src/pattern.rs", include_str!("../../kit-src/pattern.rs")),
    ("src/shell.rs", include_str!("../../kit-src/shell.rs")),
    (
        "src/shell/tests.rs",
        include_str!("../../kit-src/shell/tests.rs"),
    ),
];

/// Where the kit's `lib.rs` starts its doc-test hook (cut from the copy).
const KIT_DOCTEST_HOOK: &str = "/// The Rust examples of the policy authoring guide";

/// The manifest of the copied kit (the workspace's own manifest inherits from the workspace).
const KIT_CARGO: &str = r#"[package]
name = "shellward-kit"
version = "{{version}}"
edition = "2024"
description = "Building blocks for shellward policies (copied by `shellward policy new`; update by scaffolding again)."
publish = false

[dependencies]
"#;

/// The language of a new policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust with wit-bindgen (`cargo build --target wasm32-wasip2`).
    Rust,
    /// Python with componentize-py.
    Python,
}

#[derive(Args, Debug)]
pub struct NewArgs {
    /// The policy's name: lowercase letters, digits and `-`, starting with a letter (e.g. `no-telnet`).
    pub name: String,
    /// The language.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Directory to create (default: ./NAME). It must not exist yet, or be empty.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

const RUST_CARGO: &str = r#"[package]
name = "{{name}}"
version = "0.1.0"
edition = "2024"
description = "A shellward policy."

[lib]
crate-type = ["cdylib"]

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }
serde_json = "1"
# Reads command lines the way the shell does (copied here by `shellward policy new`).
shellward-kit = { path = "shellward-kit" }

# A policy is built on its own, not as part of an enclosing workspace.
[workspace]

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true
"#;

const RUST_LIB: &str = r#"//! {{name}}: a shellward policy.
//!
//! It denies commands whose program is in the `deny_programs` setting (default: `telnet`, `ftp`) and lets every
//! other command run unchanged. Edit `decide` to make it yours; `cases.toml` says what it must do.
//!
//! Commands are read with `shellward_kit::effective`, never word by word: `FOO=1 telnet x`, `cd /tmp && telnet x`,
//! `sudo telnet x`, `timeout 5 telnet x` and `bash -c 'telnet x'` all run telnet, and `echo telnet` does not.

wit_bindgen::generate!({ path: "wit", world: "policy-world" });

use exports::shellward::policy::policy::Guest;
use shellward::policy::host::{Level, log};
use shellward::policy::types::{Denial, OnTimeout, Outcome, Plan, Request, Rule};
use shellward_kit::effective::effective_commands;
use std::cell::RefCell;

thread_local! {
    static DENY: RefCell<Vec<String>> = RefCell::new(vec!["telnet".into(), "ftp".into()]);
}

/// Reads the settings JSON: `{"deny_programs": ["telnet", ...]}`. Errors name the field.
fn parse_settings(text: &str) -> Result<Option<Vec<String>>, String> {
    let value: serde_json::Value = serde_json::from_str(if text.trim().is_empty() { "{}" } else { text })
        .map_err(|e| format!("settings are not valid JSON: {e}"))?;
    let object = value.as_object().ok_or("settings must be a JSON object")?;
    let mut deny = None;
    for (key, v) in object {
        match key.as_str() {
            "deny_programs" => {
                let list = v
                    .as_array()
                    .and_then(|a| a.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
                    .ok_or("setting `deny_programs` must be an array of strings")?;
                deny = Some(list);
            }
            other => return Err(format!("unknown setting `{other}`; the only setting is deny_programs")),
        }
    }
    Ok(deny)
}

/// The decision: deny a listed program wherever it would run, otherwise run the request unchanged.
fn decide(request: Request, deny: &[String]) -> Outcome {
    // A line that does not tokenize runs unchanged: the shell refuses it too.
    if let Ok(reading) = effective_commands(&request.command) {
        for command in &reading.commands {
            if let Some(program) = command.name().filter(|p| deny.iter().any(|d| d == p)) {
                return Outcome::Deny(Denial {
                    reason: format!("{{name}}: `{program}` is not allowed here; use a secure alternative (e.g. ssh)"),
                    rule: Some("deny-programs".into()),
                });
            }
        }
    }
    Outcome::Run(Plan {
        command: request.command,
        workdir: request.workdir,
        background: request.background.unwrap_or(false),
        timeout_ms: request.timeout_ms,
        on_timeout: request.on_timeout.unwrap_or(OnTimeout::Background),
        env: request.env,
        notes: Vec::new(),
        interactive: request.interactive,
        tty: request.tty,
        // What the command may touch: the operator's (or an earlier policy's) confinement, unchanged. A policy may
        // narrow it, e.g. `network: Network::None` for commands that need no network.
        confinement: request.confinement,
        startup_wait_ms: request.startup_wait_ms,
        rules: Vec::new(),
    })
}

struct Policy;

impl Guest for Policy {
    fn configure(settings: String) -> Result<(), String> {
        if let Some(list) = parse_settings(&settings)? {
            log(Level::Debug, &format!("denying {} programs", list.len()));
            DENY.with(|d| *d.borrow_mut() = list);
        }
        Ok(())
    }

    fn evaluate(request: Request) -> Outcome {
        DENY.with(|d| decide(request, &d.borrow()))
    }

    /// The rules `decide` names, for `shellward policy test --coverage`.
    fn rules() -> Vec<Rule> {
        vec![Rule {
            id: "deny-programs".into(),
            summary: "refuses the programs of the deny_programs setting".into(),
        }]
    }
}

export!(Policy);
"#;

const PYTHON_APP: &str = r#""""{{name}}: a shellward policy.

It denies commands whose program is in the `deny_programs` setting (default: telnet, ftp) and lets every other command
run unchanged. It reads commands as a shell would (shellward_reader.py, the Python part of shellward-kit): the
program behind `sudo -u deploy timeout 5 …`, after `FOO=1`, later in a list, inside `bash -lc '…'`, and not a quoted
word. Edit `decide` to make it yours; cases.toml says what it must do.
"""

import json

from componentize_py_types import Err
from shellward_reader import ParseError, effective_commands
from wit_world import exports
from wit_world.imports import host, types

DENY = ["telnet", "ftp"]


def parse_settings(text):
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError("settings must be a JSON object")
    for key, v in value.items():
        if key != "deny_programs":
            raise ValueError(f"unknown setting `{key}`; the only setting is deny_programs")
        if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
            raise ValueError("setting `deny_programs` must be an array of strings")
    return value.get("deny_programs")


def decide(request, deny):
    try:
        commands = effective_commands(request.command)
    except ParseError as e:
        return types.Outcome_Deny(
            types.Denial(
                reason=f"{{name}}: the command could not be read ({e}); split it into simpler commands",
                rule="unreadable",
            )
        )
    for command in commands:
        if not command.words or not command.program_known():
            continue
        program = command.words[0].rsplit("/", 1)[-1]
        if program in deny:
            return types.Outcome_Deny(
                types.Denial(
                    reason=f"{{name}}: `{program}` is not allowed here; use a secure alternative (e.g. ssh)",
                    rule="deny-programs",
                )
            )
    return types.Outcome_Run(
        types.Plan(
            command=request.command,
            workdir=request.workdir,
            background=bool(request.background),
            timeout_ms=request.timeout_ms,
            on_timeout=request.on_timeout if request.on_timeout is not None else types.OnTimeout.BACKGROUND,
            env=request.env,
            notes=[],
            interactive=request.interactive,
            tty=request.tty,
            # The operator's (or an earlier policy's) confinement, unchanged; a policy may narrow it.
            confinement=request.confinement,
            startup_wait_ms=request.startup_wait_ms,
            rules=[],
        )
    )


class Policy(exports.Policy):
    def configure(self, settings: str) -> None:
        global DENY
        try:
            listed = parse_settings(settings)
        except ValueError as e:
            raise Err(str(e))
        if listed is not None:
            DENY = listed
        host.log(host.Level.DEBUG, f"denying {len(DENY)} programs")

    def evaluate(self, request: types.Request) -> types.Outcome:
        return decide(request, DENY)

    def rules(self) -> list[types.Rule]:
        return [
            types.Rule(id="deny-programs", summary="refuses the programs of the deny_programs setting"),
            types.Rule(id="unreadable", summary="refuses a command that cannot be read"),
        ]
"#;

/// Cases that need a shell reader (the Rust scaffold's `shellward-kit`, the Python scaffold's `shellward_reader.py`).
const READER_CASES: &str = include_str!("templates/reader_cases.toml");

const PYTHON_BUILD: &str = r#"#!/usr/bin/env bash
# Builds the policy component with componentize-py (pip install componentize-py); COMPONENTIZE_PY overrides the command.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p target
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w policy-world componentize app -o target/{{name}}.wasm
echo "built target/{{name}}.wasm"
"#;

/// The scaffold's case file (`{{name}}` and `{{wasm}}` filled in when written).
const CASES: &str = include_str!("templates/cases.toml");

const README: &str = r#"# {{name}}

A shellward policy ({{lang}}). It denies the programs listed in its `deny_programs` setting (default `telnet`,
`ftp`) and lets everything else run unchanged.

Build and test:

```sh
{{build}}
shellward policy test {{wasm}}        # runs cases.toml (found next to the policy)
shellward policy bench {{wasm}}
shellward policy inspect {{wasm}}
```

Install it by adding it to the shellward config file (a config with `[[policy]]` entries replaces the built-in chain,
so name the built-ins you keep: the default policy first, the guard after it):

```toml
[[policy]]
builtin = "default"

[[policy]]
builtin = "guard"

[[policy]]
path = "{{wasm_abs}}"
[policy.settings]
deny_programs = ["telnet", "ftp", "rsh"]
```

`wit/policy.wit` is a copy of the contract (`shellward:policy@{{wit_version}}`); see shellward's policies/README.md for the
authoring guide.
"#;

fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}

fn write(dir: &Path, rel: &str, text: &str) -> Result<()> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

pub fn new(args: NewArgs) -> Result<ExitCode> {
    if !valid_name(&args.name) {
        bail!(
            "invalid policy name {:?}: use lowercase letters, digits and `-`, starting with a letter (e.g. no-telnet)",
            args.name
        );
    }
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} already exists and is not empty; choose another name or --dir",
            dir.display()
        );
    }
    let crate_file = args.name.replace('-', "_");
    let (wasm, build, lang) = match args.lang {
        Lang::Rust => (
            format!("target/wasm32-wasip2/release/{crate_file}.wasm"),
            "rustup target add wasm32-wasip2\ncargo build --target wasm32-wasip2 --release"
                .to_string(),
            "Rust, wit-bindgen",
        ),
        Lang::Python => (
            format!("target/{}.wasm", args.name),
            "pip install componentize-py\n./build.sh".to_string(),
            "Python, componentize-py",
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let abs = dir.canonicalize().unwrap_or_else(|_| dir.clone());
    let wasm_abs = abs.join(&wasm).display().to_string();
    let vars = [
        ("name", args.name.as_str()),
        ("wasm", wasm.as_str()),
        ("wasm_abs", wasm_abs.as_str()),
        ("build", build.as_str()),
        ("lang", lang),
        ("wit_version", shellward_policy::WIT_VERSION),
    ];
    write(&dir, "wit/policy.wit", WIT)?;
    let cases = format!("{}{}", render(CASES, &vars), READER_CASES);
    write(&dir, "cases.toml", &cases)?;
    write(&dir, "README.md", &render(README, &vars))?;
    write(&dir, ".gitignore", "target/\n")?;
    match args.lang {
        Lang::Rust => {
            write(&dir, "Cargo.toml", &render(RUST_CARGO, &vars))?;
            write(&dir, "src/lib.rs", &render(RUST_LIB, &vars))?;
            let version = [("version", env!("CARGO_PKG_VERSION"))];
            write(
                &dir,
                "shellward-kit/Cargo.toml",
                &render(KIT_CARGO, &version),
            )?;
            for (rel, text) in KIT_FILES {
                // The kit's doc-test hook includes the authoring guide, which a scaffold does not have.
                let text = match text.find(KIT_DOCTEST_HOOK) {
                    Some(at) => &text[..at],
                    None => text,
                };
                write(&dir, &format!("shellward-kit/{rel}"), text)?;
            }
        }
        Lang::Python => {
            write(&dir, "app.py", &render(PYTHON_APP, &vars))?;
            write(&dir, "shellward_reader.py", PYTHON_READER)?;
            write(&dir, "build.sh", &render(PYTHON_BUILD, &vars))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let script = dir.join("build.sh");
                let mut perms = std::fs::metadata(&script)?.permissions();
                perms.set_mode(0o755);
                std::fs::set_permissions(&script, perms)?;
            }
        }
    }
    println!("created {} ({lang})", dir.display());
    println!("next:\n  cd {}", dir.display());
    for line in build.lines() {
        println!("  {line}");
    }
    println!("  shellward policy test {wasm}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "no-telnet", "guard2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "A", "a_b", "a-", "1a", "a b", "../x"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn templates_are_fully_rendered() {
        let vars = [
            ("name", "x"),
            ("wasm", "w"),
            ("wasm_abs", "/w"),
            ("build", "b"),
            ("lang", "l"),
            ("wit_version", "0.0.0"),
        ];
        for t in [
            RUST_CARGO,
            RUST_LIB,
            PYTHON_APP,
            PYTHON_BUILD,
            CASES,
            README,
        ] {
            assert!(!render(t, &vars).contains("{{"), "{t}");
        }
    }
}
