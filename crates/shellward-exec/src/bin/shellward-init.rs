//! `shellward-init`: the PID-namespace init of a command, for hosts that embed `shellward-exec` without calling
//! `shellward_exec::init_main_if_requested()` in their own `main`: point `ExecutorConfig::init_program` at this
//! binary. It is started by the executor only (`shellward-init __shellward-init REPORT_FD PROGRAM -- ARGV…`).

fn main() {
    shellward_exec::init_main_if_requested();
    eprintln!(
        "shellward-init is started by shellward's executor as the init of a command's PID namespace; it is not run \
         by hand. Set ExecutorConfig::init_program to its path to enable PID namespaces in a host."
    );
    std::process::exit(2);
}
