//! The shell examples of the README and the manual (`docs/src`), run as written (with this build's binary for
//! `./target/release/shellward` and a free port for `localhost:7878`), their output compared with what they show,
//! and every chapter's place in the manual's table of contents. The Rust examples are compiled by the doc tests of
//! `crates/shellward` (README and manual) and `crates/shellward-kit` (authoring guide).

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{Server, bin};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The README, then the manual's chapters in the order of its table of contents: the documentation as one text, so
/// an example is found wherever it lives.
fn readme() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    for chapter in chapters() {
        text.push('\n');
        text.push_str(&std::fs::read_to_string(root.join("docs/src").join(chapter)).unwrap());
    }
    text
}

/// The manual's chapter files, as `docs/src/SUMMARY.md` lists them.
fn chapters() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).unwrap();
    summary
        .lines()
        .filter_map(|l| {
            l.split_once("](")
                .map(|(_, rest)| rest.trim_end_matches(')').to_string())
        })
        .collect()
}

/// Every chapter file is in the table of contents (an unlisted one is never built), every listed one exists, and the
/// README stays a page a newcomer reads in minutes: at most 250 lines, the set-up commands in its first 40.
#[test]
fn the_manual_lists_every_chapter_and_the_readme_stays_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let listed = chapters();
    let mut files: Vec<String> = std::fs::read_dir(root.join("docs/src"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    files.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(
        sorted, files,
        "docs/src/SUMMARY.md and the chapter files differ"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 250,
        "the README has {} lines",
        readme.lines().count()
    );
    let first: Vec<&str> = readme.lines().take(40).collect();
    for command in ["cargo build --release", "cargo test --workspace"] {
        assert!(
            first.iter().any(|l| l.starts_with(command)),
            "{command} is not in the README's first 40 lines"
        );
    }
    // Links from the README into the manual point at files that exist.
    for link in readme.split("](docs/src/").skip(1) {
        let file = link.split([')', '#']).next().unwrap();
        assert!(root.join("docs/src").join(file).exists(), "{file}");
    }
}

/// The code blocks of a kind (`sh`, `text`), in order.
fn blocks(text: &str, kind: &str) -> Vec<String> {
    let fence = format!("```{kind}\n");
    text.split(fence.as_str())
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or("").to_string())
        .collect()
}

/// Replaces the random part of private log directories so runs compare equal.
fn normalize(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("shellward-") {
        let (head, tail) = rest.split_at(at + "shellward-".len());
        out.push_str(head);
        let n = tail
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(tail.len());
        out.push('X');
        rest = &tail[n..];
    }
    out.push_str(rest);
    mask_instance(&out.replace(std::env::temp_dir().to_str().unwrap(), "/tmp"))
}

/// Process ids carry a random per-server tag (`p1-k3x9q2mz`): replaced by `X` so samples compare.
fn mask_instance(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(tag) = instance_tag(rest) {
        let at = rest.find(&format!("-{tag}")).unwrap();
        out.push_str(&rest[..at]);
        out.push_str("-X");
        rest = &rest[at + 1 + tag.len()..];
    }
    out.push_str(rest);
    out
}

/// The tag of the first process id (`p<digits>-<8 of [a-z0-9]>`) in `text`.
fn instance_tag(text: &str) -> Option<String> {
    let b = text.as_bytes();
    for (i, _) in text.match_indices('p') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let dash = i + 1 + digits;
        if digits == 0 || b.get(dash) != Some(&b'-') {
            continue;
        }
        let tag = &b[dash + 1..];
        if tag.len() >= 8
            && tag[..8]
                .iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && tag.get(8).is_none_or(|c| !c.is_ascii_alphanumeric())
        {
            return Some(String::from_utf8_lossy(&tag[..8]).into_owned());
        }
    }
    None
}

fn sh(line: &str) -> std::process::Output {
    let line = line.replace("./target/release/shellward", &format!("'{}'", bin()));
    Command::new("sh")
        .args(["-c", &line])
        .env_remove("SHELLWARD_CONFIG")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("SHELLWARD_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_run_it_examples_print_what_the_readme_shows() {
    let text = readme();
    let setup = &blocks(&text, "sh")[0];
    assert!(setup.starts_with("cargo build --release"), "{setup}");
    let run_it = blocks(&text, "sh")
        .into_iter()
        .find(|b| b.contains("run --explain"))
        .expect("the README's `run` example");
    // The example's lines after the build the setup block made.
    let lines: Vec<&str> = std::iter::once("cargo build --release")
        .chain(run_it.lines())
        .collect();
    // The sample printed after "The first command above shows".
    let sample = text
        .split("The first command above shows")
        .nth(1)
        .map(|after| blocks(after, "text")[0].clone())
        .expect("the README's sample output");

    let first = sh(lines[1]);
    assert_eq!(first.status.code(), Some(0));
    let got = format!(
        "{}{}",
        String::from_utf8_lossy(&first.stderr),
        String::from_utf8_lossy(&first.stdout)
    );
    assert_eq!(
        normalize(got.trim_end()),
        normalize(sample.trim_end()),
        "the README's sample differs from what `{}` prints",
        lines[1]
    );

    let second = sh(lines[2]);
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    let out = String::from_utf8_lossy(&second.stdout);
    for field in [
        "decision:   run",
        "command:    npm run dev",
        "mode:       background",
    ] {
        assert!(out.contains(field), "{field:?} missing from:\n{out}");
    }
}

#[test]
fn the_http_examples_work_against_serve() {
    let text = readme();
    let examples = blocks(&text, "sh")
        .into_iter()
        .find(|b| b.starts_with("curl"))
        .expect("the README's curl examples");
    // Stopped (and proven to leave nothing) at the end; killed with what it started if an assertion fails first.
    let server = Server::start(&[]);
    let base = server.base.clone();
    let base = base.trim_start_matches("http://").to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut answers: Vec<Value> = Vec::new();
    // The README's ids carry a sample tag; this server's ids carry its own.
    let mut tag = None;
    // `ID=…` names the id the later lines use (`$ID`), as a reader substitutes the one their server answered.
    let mut id_var = String::new();
    // `AP=…` names a pending approval (`$AP`): the one this server's last answer carried.
    let mut approval = String::new();
    for example in examples.lines() {
        // `curl -s URL [-d 'JSON']   # comment`, URL possibly quoted.
        let example = example.split("   #").next().unwrap().trim();
        if let Some(value) = example.strip_prefix("ID=") {
            id_var = value
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            continue;
        }
        if example.starts_with("AP=") {
            assert!(
                !approval.is_empty(),
                "no call before {example} answered a pending approval"
            );
            continue;
        }
        let example = example.replace("$ID", &id_var).replace("$AP", &approval);
        let example = example.as_str();
        let rest = example.strip_prefix("curl -s ").expect(example);
        let (url, body) = match rest.split_once(" -d ") {
            Some((u, b)) => (u, Some(b.trim().trim_matches('\''))),
            None => (rest, None),
        };
        let mut url = format!(
            "http://{}",
            url.trim()
                .trim_matches(['\'', '"'])
                .replace("localhost:7878", &base)
        );
        if let Some(t) = &tag {
            url = url.replace("-k3x9q2mz", &format!("-{t}"));
        }
        let mut response = match body {
            Some(b) => agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(b),
            None => agent.get(&url).call(),
        }
        .unwrap();
        let status = response.status().as_u16();
        let json: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap())
            .unwrap_or_else(|e| panic!("{example}: not JSON ({e})"));
        if let Some(id) = json["pending_approval"]["id"].as_str() {
            approval = id.to_string();
        }
        // The last example stops p1, which may have ended already (409 says so).
        assert!(
            status == 200 || (status == 409 && example.contains("/signal")),
            "{example}: {status} {json}"
        );
        // A started process's id (the tool list's examples carry the README's sample tag).
        let started = ["id", "process_id", "background_process_id"]
            .iter()
            .find_map(|k| json.get(*k).and_then(Value::as_str).and_then(instance_tag));
        tag = tag.or(started);
        answers.push(json);
    }
    assert_eq!(answers.len(), 9);
    // The asked command waited, was listed, and was refused when denied.
    assert!(
        answers[6]["pending_approval"]["id"].is_string(),
        "{}",
        answers[6]
    );
    assert_eq!(
        answers[7]["pending"][0]["id"], answers[6]["pending_approval"]["id"],
        "{}",
        answers[7]
    );
    assert_eq!(answers[8]["denied"], true, "{}", answers[8]);
    let tools = answers[0].to_string();
    for tool in [
        "execute",
        "process_output",
        "process_list",
        "process_signal",
    ] {
        assert!(tools.contains(tool), "{tools}");
    }
    server.stop();
}

/// The README's quick starts, as written (with this build's binary for `/home/you/.cargo/bin/shellward`): each
/// client's command line starts a server that answers the MCP handshake and lists the five tools, and
/// `mcp --client-config` prints the same snippet.
#[test]
fn the_quick_starts_reach_a_working_mcp_server() {
    const PLACEHOLDER: &str = "/home/you/.cargo/bin/shellward";
    let text = readme();
    let section = text
        .split("## Quick start: an MCP client")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README's quick start");
    let real = std::fs::canonicalize(bin()).unwrap().display().to_string();
    let mut lines: Vec<(&str, String, Vec<String>)> = Vec::new();
    // Claude Code: the command line after `--`.
    let claude = blocks(section, "sh")[0].trim().to_string();
    let words: Vec<String> = claude
        .split(" -- ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    lines.push(("claude-code", claude.clone(), words));
    // The JSON clients.
    let json = blocks(section, "json")[0].trim().to_string();
    let v: Value = serde_json::from_str(&json).expect("the JSON snippet parses");
    let server = &v["mcpServers"]["shellward"];
    let mut words = vec![server["command"].as_str().unwrap().to_string()];
    words.extend(
        server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    for client in ["cursor", "claude-desktop", "json"] {
        lines.push((client, json.clone(), words.clone()));
    }
    // Codex's TOML.
    let codex = blocks(section, "toml")[0].trim().to_string();
    let field = |key: &str| {
        codex
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap()
            .to_string()
    };
    let mut words = vec![serde_json::from_str::<String>(&field("command")).unwrap()];
    words.extend(serde_json::from_str::<Vec<String>>(&field("args")).unwrap());
    lines.push(("codex", codex.clone(), words));

    for (client, snippet, words) in lines {
        assert_eq!(words[0], PLACEHOLDER, "{client}: {snippet}");
        // What --client-config prints is the README's snippet with the real path.
        let printed = Command::new(bin())
            .args(["mcp", "--client-config", client])
            .output()
            .unwrap();
        assert!(printed.status.success());
        assert_eq!(
            String::from_utf8_lossy(&printed.stdout).trim(),
            snippet.replace(PLACEHOLDER, &real),
            "{client}"
        );
        // The command line, run as the client runs it, answers the handshake with the five tools.
        let mut command = Command::new(&real);
        command.args(&words[1..]);
        let (mut child, mut stdin, mut out) = crate::cli::start_stdio(command);
        use std::io::{BufRead, Write};
        let mut ask = |message: &str, answered: bool| -> Value {
            writeln!(stdin, "{message}").unwrap();
            if !answered {
                return Value::Null;
            }
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{client}: {e}: {line:?}"))
        };
        let init = ask(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"readme","version":"1"}}}"#,
            true,
        );
        assert_eq!(
            init["result"]["serverInfo"]["name"]
                .as_str()
                .map(|n| n.contains("shellward")),
            Some(true),
            "{client}: {init}"
        );
        ask(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            false,
        );
        let tools = ask(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, true);
        let names: Vec<&str> = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 7, "{client}: {names:?}");
        drop(stdin);
        let status = crate::cli::wait_exit(&mut child, Duration::from_secs(30));
        assert!(status.success(), "{client}: {status}");
    }
}

/// The figures that drift cheaply are checked: the WIT versions the README and the authoring guide name are the ones
/// this host loads, natively and through adapters.
#[test]
fn the_documented_wit_versions_are_the_hosts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = readme();
    let guide = std::fs::read_to_string(root.join("policies/README.md")).unwrap();
    let current = shellward_policy::WIT_VERSION;
    let minor = |v: &str| v.rsplit_once('.').map(|(m, _)| m.to_string()).unwrap();
    // `0.2.*` or `0.2.x`.
    let names = |doc: &str, v: &str| {
        let m = minor(v);
        doc.contains(&format!("{m}.*")) || doc.contains(&format!("{m}.x"))
    };
    assert!(
        readme.contains(&format!("shellward:policy@{current}")),
        "the README's WIT section names another version than {current}"
    );
    for doc in [&readme, &guide] {
        assert!(names(doc, current), "{current} not documented");
        for adapted in shellward_policy::ADAPTED_WIT_VERSIONS {
            assert!(
                names(doc, adapted),
                "the adapted {adapted} is not documented"
            );
        }
    }
    // Each contract version in a folder of its own, `wit/v0.4/` for 0.4.0, the current and the adapted ones alike.
    for v in std::iter::once(current).chain(shellward_policy::ADAPTED_WIT_VERSIONS.iter().copied())
    {
        let file = root.join(format!("wit/v{}/policy.wit", minor(v)));
        let wit =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            wit.contains(&format!("package shellward:policy@{v};")),
            "{}",
            file.display()
        );
    }
}

/// Every configuration block of the manual (` ```toml ` in `docs/src`) is a valid configuration: `config check` passes
/// it as written, in a directory holding what it names (a drop-in directory `policies.d`), but for the example
/// registry, which it tries and cannot reach.
#[test]
fn every_configuration_block_of_the_manual_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    for chapter in chapters() {
        let text = std::fs::read_to_string(root.join("docs/src").join(&chapter)).unwrap();
        for (i, block) in blocks(&text, "toml").into_iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("policies.d")).unwrap();
            let file = crate::cli::write_file(dir.path(), "shellward.toml", &block);
            let out = Command::new(bin())
                .args(["config", "check", file.to_str().unwrap()])
                .current_dir(dir.path())
                .env("AGENT_A_TOKEN", "a-token-for-the-check")
                .output()
                .unwrap();
            // The example registry (`registry.example.com`) cannot be reached from here: the only problem allowed.
            let err = String::from_utf8_lossy(&out.stderr);
            let unreachable_example = err.lines().skip(1).all(|l| {
                l.contains("registry.example.com") && l.contains("cannot reach the registry")
            });
            assert!(
                out.status.success() || (err.lines().count() > 1 && unreachable_example),
                "{chapter}, block {i}:\n{block}\n{err}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked} blocks");
}

/// The manual's systemd unit (` ```ini `) is one systemd accepts (`systemd-analyze verify`), with this build's binary
/// for `/usr/local/bin/shellward` and a user this machine has for `agent`. (An end-of-line comment, which systemd
/// reads as part of the value, made `User=` invalid.)
#[test]
fn the_manuals_systemd_unit_verifies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("docs/src/operations.md")).unwrap();
    let units = blocks(&text, "ini");
    assert_eq!(units.len(), 1, "the operations chapter's unit");
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("shellward.service");
    let real = std::fs::canonicalize(bin()).unwrap();
    std::fs::write(
        &unit,
        units[0]
            .replace("/usr/local/bin/shellward", real.to_str().unwrap())
            .replace("User=agent", "User=nobody"),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze (Debian's systemd package) checks the manual's unit; install it");
    assert!(
        out.status.success(),
        "{}\n{}",
        units[0],
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The manual's `sandbox check` sample (taken as a normal user on the CI machine) names the lines this build prints:
/// every line of the sample is a line `sandbox check` prints here (same label), and every line it prints is in the
/// sample, so the sample cannot drift from the command.
#[test]
fn the_manuals_sandbox_check_sample_has_the_lines_the_command_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("docs/src/security.md")).unwrap();
    let sample = blocks(&text, "text")
        .into_iter()
        .find(|b| b.starts_with("$ shellward sandbox check"))
        .expect("the sample");
    let label = |line: &str| -> Option<String> {
        let rest = line
            .strip_prefix("yes  ")
            .or_else(|| line.strip_prefix("no   "))?;
        rest.split_once(':').map(|(l, _)| l.to_string())
    };
    let documented: Vec<String> = sample.lines().filter_map(label).collect();
    let out = Command::new(bin())
        .args(["sandbox", "check"])
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .unwrap();
    let printed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(label)
        .map(|l| {
            // Root's lines name the containment it has; the sample (a normal user) names what it lacks.
            match l.as_str() {
                "tree containment" => "cgroup containment".to_string(),
                _ => l,
            }
        })
        .collect();
    let mut a = documented.clone();
    let mut b = printed.clone();
    a.sort();
    b.sort();
    assert_eq!(
        a,
        b,
        "sample:\n{sample}\nprinted:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The license the crates declare is the one the repository ships: LICENSE holds the Apache License 2.0, every
/// crate's `license` is `Apache-2.0`, no placeholder repository address is declared, and the README points to it.
#[test]
fn the_repository_ships_the_license_its_crates_declare() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let license = std::fs::read_to_string(root.join("LICENSE")).expect("a LICENSE file");
    assert!(
        license.contains("Apache License") && license.contains("Version 2.0, January 2004"),
        "LICENSE is not the Apache License 2.0"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"Apache-2.0\""), "{manifest}");
    assert!(
        !manifest.contains("example.invalid"),
        "a placeholder repository address"
    );
    assert!(readme().contains("[LICENSE](LICENSE)"));
}

/// The manual stands alone: every link of every chapter — with what the chapters `{{#include}}` (README parts, the
/// policy READMEs, ARCHITECTURE.md) — is a web address, an anchor, or a file inside the book (a chapter the table of
/// contents lists); none leads out of `docs/src`, where the built book has nothing.
#[test]
fn every_link_of_the_manual_stays_inside_the_book() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = root.join("docs/src");
    let listed = chapters();
    let mut broken = Vec::new();
    for chapter in &listed {
        let text = with_includes(&src, &std::fs::read_to_string(src.join(chapter)).unwrap());
        for target in links(&text) {
            if target.starts_with('#') || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap();
            let inside = Path::new(file)
                .components()
                .all(|c| !matches!(c, std::path::Component::ParentDir));
            let ok = inside
                && src.join(file).exists()
                && (!file.ends_with(".md") || listed.iter().any(|c| c == file));
            if !ok {
                broken.push(format!("{chapter}: {target}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that leave the book or lead nowhere:\n{}",
        broken.join("\n")
    );
}

/// `text` with each `{{#include PATH}}` / `{{#include PATH:ANCHOR}}` replaced by what mdBook puts there.
fn with_includes(dir: &Path, text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let Some(spec) = line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|s| s.strip_suffix("}}"))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (path, anchor) = match spec.split_once(':') {
            Some((p, a)) => (p, Some(a)),
            None => (spec, None),
        };
        let included = std::fs::read_to_string(dir.join(path))
            .unwrap_or_else(|e| panic!("{{{{#include {spec}}}}}: {e}"));
        match anchor {
            None => out.push_str(&included),
            Some(a) => {
                let part = included
                    .split(&format!("ANCHOR: {a} -->"))
                    .nth(1)
                    .and_then(|rest| rest.split(&format!("<!-- ANCHOR_END: {a}")).next())
                    .unwrap_or_else(|| panic!("no anchor {a} in {path}"));
                out.push_str(part);
            }
        }
        out.push('\n');
    }
    out
}

/// The link targets of Markdown `text` outside code (`[text](target)`).
fn links(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            // Inline code cannot hold a link.
            let mut inside = false;
            for part in line.split('`') {
                if !inside {
                    prose.push_str(part);
                }
                inside = !inside;
            }
            prose.push('\n');
        }
    }
    prose
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|t| t.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}
