//! The effective-command reader's tests.

use super::*;

/// Each effective command as `via… => words`.
fn read(line: &str) -> Vec<String> {
    effective_commands(line)
        .unwrap()
        .commands
        .iter()
        .map(|c| {
            if c.via.is_empty() {
                c.words.join(" ")
            } else {
                format!("{} => {}", c.via.join(", "), c.words.join(" "))
            }
        })
        .collect()
}

/// Bash runs `$((cmd) …)` as a command substitution (a subshell first), and keeps `$((…))` arithmetic only when
/// the second parenthesis closes right before the last one.
#[test]
fn a_double_parenthesis_that_is_a_command_substitution_is_read() {
    for line in [
        "echo $((rm -rf /) )",
        "echo \"$((rm -rf /); true)\"",
        "x=$((rm -rf /)|cat)",
    ] {
        let commands = read(line);
        assert!(
            commands.iter().any(|c| c.ends_with("=> rm -rf /")),
            "{line}: {commands:?}"
        );
    }
    for line in [
        "echo $(( (1+2) * 3 ))",
        "echo $((1+(2)))",
        "echo $(( (x) ))",
    ] {
        assert_eq!(read(line).len(), 1, "{line}: {:?}", read(line));
    }
}

#[test]
fn wrappers_are_stripped_with_their_options() {
    for (line, want) in [
        ("timeout 5 kill -9 -1", "timeout => kill -9 -1"),
        (
            "timeout -s KILL -k 2 5s kill -9 -1",
            "timeout => kill -9 -1",
        ),
        ("nice -n 10 pkill node", "nice => pkill node"),
        ("nice -5 pkill node", "nice => pkill node"),
        ("env -i FOO=1 PATH=/bin rm -rf /", "env => rm -rf /"),
        ("env -u HOME -C /tmp kill -9 -1", "env => kill -9 -1"),
        ("sudo -u root -E reboot", "sudo => reboot"),
        ("doas -u root reboot", "doas => reboot"),
        ("busybox kill -9 -1", "busybox => kill -9 -1"),
        ("command kill -9 -1", "command => kill -9 -1"),
        ("builtin kill -9 -1", "builtin => kill -9 -1"),
        ("exec -a x kill -9 -1", "exec => kill -9 -1"),
        ("time kill -9 -1", "kill -9 -1"),
        ("/usr/bin/time -f %e kill -9 -1", "time => kill -9 -1"),
        ("nohup setsid pkill node", "nohup, setsid => pkill node"),
        ("stdbuf -oL -e 0 pkill node", "stdbuf => pkill node"),
        ("ionice -c 3 -n 7 pkill node", "ionice => pkill node"),
        ("chrt -f 10 pkill node", "chrt => pkill node"),
        ("taskset -c 0,1 pkill node", "taskset => pkill node"),
        ("taskset 0x3 pkill node", "taskset => pkill node"),
        ("flock /tmp/l pkill node", "flock => pkill node"),
        (
            "flock -w 5 /tmp/l -c 'pkill node'",
            "flock, flock -c => pkill node",
        ),
        ("watch -n 1 pkill node", "watch => pkill node"),
        ("watch -x pkill node", "watch => pkill node"),
        ("xargs -0 -n1 pkill", "xargs => pkill"),
        ("! sudo id", "sudo => id"),
        ("nohup", "nohup"),
        ("exec 3>/dev/sda", "exec"),
        ("chroot / rm -rf /", "chroot => rm -rf /"),
        (
            "chroot --userspec 1:1 /srv kill -9 -1",
            "chroot => kill -9 -1",
        ),
        ("unshare -r -m rm -rf /", "unshare => rm -rf /"),
        ("nsenter -t 1 -m -p kill -9 -1", "nsenter => kill -9 -1"),
        ("strace -f -o /tmp/t rm -rf /", "strace => rm -rf /"),
        ("unbuffer pkill node", "unbuffer => pkill node"),
        (
            "systemd-run --user -p MemoryMax=1G pkill node",
            "systemd-run => pkill node",
        ),
        (
            "script -qc 'pkill node' /dev/null",
            "script, script -c => pkill node",
        ),
        (
            "script --command='kill -9 -1'",
            "script, script -c => kill -9 -1",
        ),
    ] {
        assert_eq!(read(line), [want], "{line}");
    }
}

#[test]
fn shell_strings_are_read() {
    for (line, want) in [
        ("bash -lc 'kill -9 -1'", "bash -c => kill -9 -1"),
        ("bash -ec 'kill -9 -1'", "bash -c => kill -9 -1"),
        ("sh -o pipefail -xc 'pkill x'", "sh -c => pkill x"),
        ("zsh -c \"sudo id\"", "zsh -c, sudo => id"),
        ("eval 'kill -9 -1'", "eval => kill -9 -1"),
        ("echo 'kill -9 -1' | bash", "| bash => kill -9 -1"),
        ("printf 'pkill node' | sh -s", "| sh => pkill node"),
        ("bash <<< 'pkill node'", "bash <<< => pkill node"),
        ("bash <<EOF\npkill node\nEOF\n", "bash << => pkill node"),
        ("cat <<'EOF' | sh\nkill -9 -1\nEOF", "| sh => kill -9 -1"),
        ("su -c 'kill -9 -1'", "su, su -c => kill -9 -1"),
        ("env -S 'kill -9 -1'", "env, env -S => kill -9 -1"),
        (
            "timeout 5 bash -c 'timeout 3 pkill x'",
            "timeout, bash -c, timeout => pkill x",
        ),
    ] {
        let got = read(line);
        assert!(got.contains(&want.to_string()), "{line}: {got:?}");
    }
    assert_eq!(
        read("echo $(pkill node)"),
        ["$(…) => pkill node", "echo $(pkill node)"]
    );
    assert_eq!(read("X=`sudo id` true"), ["$(…), sudo => id", "true"]);
    // A script file, not a string.
    assert_eq!(read("bash ./deploy.sh"), ["bash ./deploy.sh"]);
    assert_eq!(read("cat notes | bash"), ["cat notes"]);
}

#[test]
fn find_and_parallel_run_commands() {
    assert_eq!(
        read("find / -exec rm -rf {} +"),
        ["find / -exec rm -rf {} +", "find -exec => rm -rf {}"]
    );
    let r = effective_commands("find . -name x -execdir pkill {} ;").unwrap();
    assert!(r.commands[1].more_args);
    assert_eq!(r.commands[1].words, ["pkill", "{}"]);
    assert_eq!(
        read("parallel -j4 'kill -9 {}' ::: 1 2"),
        ["parallel => kill -9 {}"]
    );
}

#[test]
fn dynamic_words_are_marked() {
    let r = effective_commands("$k -9 -1; \"$CC\" main.c; '$x' y; $(which kill) -1").unwrap();
    let known: Vec<bool> = r.commands.iter().map(|c| c.program_known()).collect();
    assert_eq!(known, [false, false, true, true, false]);
    assert!(r.commands[0].dynamic.iter().skip(1).all(|d| !d));
}

#[test]
fn look_alikes_are_not_commands() {
    assert_eq!(read("echo 'kill -9 -1'"), ["echo kill -9 -1"]);
    assert_eq!(read("command -v pkill"), ["command -v pkill"]);
    assert_eq!(read("ionice -p 42"), ["ionice -p 42"]);
    assert_eq!(read("grep -r 'bash -c' ."), ["grep -r bash -c ."]);
    assert_eq!(read("timeout 5 cargo test"), ["timeout => cargo test"]);
}

#[test]
fn redirections_and_written_words_are_kept() {
    let r = effective_commands("sudo tee /dev/sda > /dev/sdb").unwrap();
    let c = &r.commands[0];
    assert_eq!(c.words, ["tee", "/dev/sda"]);
    assert_eq!(c.writes, ["/dev/sdb"]);
    assert_eq!(c.written, ["sudo", "tee", "/dev/sda"]);
    assert!(c.via("sudo"));
}

#[test]
fn static_output_is_what_echo_and_printf_print() {
    assert_eq!(static_output("echo /").as_deref(), Some("/"));
    assert_eq!(static_output("echo -n '~'").as_deref(), Some("~"));
    assert_eq!(static_output("printf '/\\n'").as_deref(), Some("/"));
    assert_eq!(static_output(" echo a  b ").as_deref(), Some("a b"));
    for line in [
        "echo $X",
        "echo /; ls",
        "echo / > f",
        "ls /",
        "X=1 echo /",
        "echo $(pwd)",
        "",
        "echo '",
    ] {
        assert_eq!(static_output(line), None, "{line}");
    }
}

#[test]
fn xargs_fed_a_known_input_gets_known_arguments() {
    for (line, want) in [
        ("echo / | xargs rm -rf", "xargs => rm -rf /"),
        ("printf 'a b' | xargs -n1 rm -f", "xargs => rm -f a b"),
        ("echo / | xargs -I{} rm -rf {}/", "xargs => rm -rf //"),
        ("xargs rm -rf <<< '~'", "xargs => rm -rf ~"),
        // Where the input is not read as blank-separated words, its arguments stay unknown.
        ("echo /tmp | xargs -0 rm -rf", "xargs => rm -rf"),
        ("find ~ -type f | xargs rm -rf", "xargs => rm -rf ~/*"),
        ("find / | xargs -I{} rm -rf {}", "xargs => rm -rf /*"),
        ("ls | xargs rm -rf", "xargs => rm -rf"),
    ] {
        let got = read(line);
        assert_eq!(
            got.last().map(String::as_str),
            Some(want),
            "{line}: {got:?}"
        );
    }
    let r = effective_commands("echo a | xargs rm; ls | xargs rm").unwrap();
    assert!(!r.commands[1].more_args, "known arguments");
    assert!(r.commands[3].more_args, "arguments only known at run time");
}

#[test]
fn assignments_are_kept_and_alone_are_commands_without_words() {
    let r = effective_commands("X=/ Y=\"$Z\"; X=1 timeout 5 rm -rf $X").unwrap();
    assert_eq!(r.commands.len(), 2);
    assert!(r.commands[0].words.is_empty());
    assert_eq!(r.commands[0].assignments, ["X=/", "Y=$Z"]);
    assert_eq!(r.commands[1].words, ["rm", "-rf", "$X"]);
    assert_eq!(r.commands[1].assignments, ["X=1"]);
}

#[test]
fn redirections_alone_are_commands_without_words() {
    for line in ["> /dev/sda", "bash -c '>/dev/sda'", "true; >>/dev/sdb"] {
        let r = effective_commands(line).unwrap();
        let c = r.commands.iter().find(|c| c.words.is_empty()).expect(line);
        assert!(c.writes[0].starts_with("/dev/sd"), "{line}: {c:?}");
    }
    // Nothing to run and nothing written: nothing yielded.
    assert!(effective_commands("< in").unwrap().commands.is_empty());
}

#[test]
fn a_visit_stops_where_its_callback_does() {
    let script = tokenize("a; timeout 5 b; c; d").unwrap();
    let mut seen = Vec::new();
    let visit = visit_effective_commands(&script, &script.simple_commands(), |c| {
        seen.push(c.line());
        if c.via("timeout") {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    assert_eq!(seen, ["a", "b"]);
    assert!(visit.stopped && !visit.truncated && !visit.too_deep);
    // Nothing more is read once stopped, not even shell strings in later words.
    let script = tokenize("a $(b) $(c)").unwrap();
    let mut seen = Vec::new();
    let visit = visit_effective_commands(&script, &script.simple_commands(), |c| {
        seen.push(c.line());
        ControlFlow::Break(())
    });
    assert_eq!(seen, ["b"]);
    assert!(visit.stopped);
}

#[test]
fn words_after_assignments_and_redirections_are_the_command() {
    let line = "A=$(sudo id) B=1 cmd -x > \"$(pkill x)\" 2>err arg 'q $y'";
    assert_eq!(
        read(line),
        ["$(…), sudo => id", "$(…) => pkill x", "cmd -x arg q $y"]
    );
    let r = effective_commands(line).unwrap();
    let c = &r.commands[2];
    assert_eq!(c.writes, ["$(pkill x)", "err"]);
    assert_eq!(c.dynamic, [false, false, false, false]);
    assert_eq!(c.written, c.words);
}

#[test]
fn long_commands_keep_every_word() {
    // More words than the reader keeps on its stack.
    let line = "if timeout 5 make -j4 a b c d e f g h i j; then echo $x 1 2 3 4 5 6 7 8 9; fi";
    assert_eq!(
        read(line),
        [
            "timeout => make -j4 a b c d e f g h i j",
            "echo $x 1 2 3 4 5 6 7 8 9"
        ]
    );
    let r = effective_commands(line).unwrap();
    assert_eq!(r.commands[0].written.len(), 14);
    assert_eq!(r.commands[1].dynamic.iter().filter(|d| **d).count(), 1);
}

#[test]
fn each_here_document_feeds_its_own_command() {
    let line = "cat <<A > notes; bash <<B\nhello\nA\npkill node\nB\n";
    assert_eq!(read(line), ["cat", "bash << => pkill node"]);
    let c = &effective_commands(line).unwrap().commands[0];
    assert_eq!(c.writes, ["notes"]);
}

#[test]
fn hostile_lines_cost_bounded_work() {
    let line = format!("{}pkill x", "eval ".repeat(20));
    let r = effective_commands(&line).unwrap();
    assert!(r.too_deep);
    assert!(!r.complete());
    let wide = "true;".repeat(MAX_COMMANDS + 10);
    let r = effective_commands(&wide).unwrap();
    assert!(r.truncated);
    assert_eq!(r.commands.len(), MAX_COMMANDS);
}
