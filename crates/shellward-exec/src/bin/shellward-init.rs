//! `shellward-init`: pid 1 of a session's sandbox (its PID namespace) as a file on disk, for hosts whose executor cannot run its
//! embedded static init (a build without it, a host that forbids executing a memfd) and whose `main` does not call
//! `shellward_exec::init_main_if_requested()`: point `ExecutorConfig::init_program` at this binary. It is started by
//! the executor only (`shellward-init __shellward-session`).

fn main() {
    shellward_exec::init_main_if_requested();
    eprintln!(
        "shellward-init is started by shellward's executor as pid 1 of a session's sandbox; it is not run \
         by hand. Set ExecutorConfig::init_program to its path to enable PID namespaces in a host."
    );
    std::process::exit(2);
}
