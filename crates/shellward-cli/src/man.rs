//! `shellward man`: the manual page (roff), generated from the command-line definition — every subcommand with its
//! synopsis, options and examples, then exit status, files and environment — so it cannot drift from `--help`.

use std::io::{self, Write};

/// Escapes text for a roff line: backslashes, and a leading `.` or `'` (which roff would read as a request).
fn escape(text: &str) -> String {
    let t = text.replace('\\', "\\e");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// Writes the whole manual page for `cmd` (the built `shellward` command).
pub fn render(mut cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    writeln!(out, ".SH COMMANDS")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        command(sub, out)?;
    }
    for (heading, paragraphs) in SECTIONS {
        writeln!(out, ".SH {heading}")?;
        for p in *paragraphs {
            match p.split_once('\t') {
                // A term and its description.
                Some((term, text)) => {
                    writeln!(out, ".TP\n.B {}\n{}", escape(term), escape(text))?;
                }
                None => writeln!(out, ".PP\n{}", escape(p))?,
            }
        }
    }
    Ok(())
}

/// One subcommand as a subsection (`.SS shellward run`), its own subcommands after it.
fn command(cmd: &clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    let children: Vec<&clap::Command> =
        cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    writeln!(out, ".SS {}", escape(&name))?;
    let man = clap_mangen::Man::new(cmd.clone());
    let mut body = Vec::new();
    man.render_synopsis_section(&mut body)?;
    man.render_description_section(&mut body)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut body)?;
    }
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        man.render_extra_section(&mut body)?;
    }
    // Sections of the subcommand's own page become bold headings inside its subsection.
    for line in String::from_utf8_lossy(&body).lines() {
        match line.strip_prefix(".SH ") {
            Some("EXTRA") => writeln!(out, ".PP\n.B MORE\n.br")?,
            Some(heading) => writeln!(out, ".PP\n.B {heading}\n.br")?,
            None => writeln!(out, "{line}")?,
        }
    }
    for child in children {
        command(child, out)?;
    }
    Ok(())
}

/// The sections after the commands: (heading, paragraphs); a paragraph with a tab is a term and its description.
const SECTIONS: &[(&str, &[&str])] = &[
    (
        "EXIT STATUS",
        &[
            "run\tthe command's exit code; 128+N when signal N ended it (130 after Ctrl-C); 124 when the foreground \
             timeout expired and the tree was killed; 126 when a policy denied the command (or asked, and nobody approved it); 125 when shellward itself \
             failed (configuration, policy load, start); 2 on a usage error.",
            "policy check\t0 when the chain would run the command, 3 when it denies it, 4 when it asks a person first, 2 on a \
             usage or load error.",
            "policy test\t0 when every case passes, 1 when one fails, 2 on a usage or load error.",
            "config check\t0 when the file is valid, 1 when it has problems (listed on stderr), 2 on a usage error.",
            "sandbox check\t0 when commands run in a session sandbox, 1 when they would run without one.",
            "mcp, serve\t0 after a clean shutdown (end of input, SIGTERM or SIGINT), 2 when they cannot start.",
        ],
    ),
    (
        "FILES",
        &[
            "shellward.toml\tthe configuration file given with --config or $SHELLWARD_CONFIG; `shellward config init` \
             writes a commented starter, `shellward config check` validates one.",
            "~/.cache/shellward\tthe compiled-policy cache (and `key`, which commands cannot read); remove it to clean \
             up. $SHELLWARD_CACHE_DIR or [sandbox] cache_dir moves it.",
            "$XDG_RUNTIME_DIR or the temporary directory\tholds a private (0700) log directory per running shellward, \
             removed at exit or by the next start after a crash.",
        ],
    ),
    (
        "ENVIRONMENT",
        &[
            "SHELLWARD_CONFIG\tthe configuration file, when --config is not given.",
            "SHELLWARD_TOKEN\tthe bearer token `serve` requires (prefer --token-file); never passed to commands.",
            "SHELLWARD_LOG\tthe log filter (tracing syntax), e.g. info or shellward=debug; default warn.",
            "SHELLWARD_CACHE_DIR\tthe compiled-policy cache directory.",
            "NO_COLOR\twhen set, the log has no colour (it has none anyway when stderr is not a terminal).",
        ],
    ),
    (
        "SEE ALSO",
        &[
            "The manual under docs/ (security model, confinement, configuration reference, operations; mdbook build \
           docs) and policies/README.md (writing policies) in shellward's source repository.",
        ],
    ),
];
