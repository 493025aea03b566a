//! Helpers of the facade's tests: instances whose processes carry a marker, and the scan that proves none survive.

#![allow(dead_code)]

use shellward::tools::ExecuteArgs;
use shellward::{Config, Shellward};
use std::time::Duration;

pub const MARK: &str = "SHELLWARD_TEST_MARK";

/// A marker unique to this call.
pub fn new_mark() -> String {
    shellward_test_support::unique_mark("facade")
}

/// The processes still carrying `mark` after up to 5 s.
pub fn survivors(mark: &str) -> Vec<i32> {
    shellward_test_support::survivors_after(&format!("{MARK}={mark}"), Duration::from_secs(5))
        .into_iter()
        .collect()
}

pub fn instance(mark: &str) -> Shellward {
    let mut config = Config::default();
    config.executor.grace = Duration::from_millis(300);
    config.executor.env.set_var(MARK, mark);
    Shellward::builder().config(config).build().expect("build")
}

pub fn exec(command: &str) -> ExecuteArgs {
    ExecuteArgs::new(command)
}

/// `execute` of `args` outside any session, with the default options; panics on an error.
pub async fn run(sw: &Shellward, args: ExecuteArgs) -> shellward::tools::ExecuteResult {
    sw.without_session()
        .execute(args, shellward::ExecuteOptions::new())
        .await
        .unwrap()
}

/// `execute` of `args` in `session`, with the default options; panics on an error.
pub async fn run_in(
    sw: &Shellward,
    session: &str,
    args: ExecuteArgs,
) -> shellward::tools::ExecuteResult {
    sw.session(session)
        .execute(args, shellward::ExecuteOptions::new())
        .await
        .unwrap()
}

/// Whether the result's sandbox line says `text`.
pub fn confinement_says(r: &shellward::tools::ExecuteResult, text: &str) -> bool {
    r.confinement.as_deref().is_some_and(|l| l.contains(text))
}

#[allow(unused_imports)]
pub use shellward::ExecuteOptions;

/// The tests' name for a session as the surfaces parse it: `Some(name)` or none.
pub trait At {
    /// The handle of `session` (`None`: outside any).
    fn at<S: AsRef<str>>(&self, session: Option<S>) -> shellward::SessionHandle;
}

impl At for shellward::Shellward {
    fn at<S: AsRef<str>>(&self, session: Option<S>) -> shellward::SessionHandle {
        match session {
            Some(s) => self.session(s.as_ref()),
            None => self.without_session(),
        }
    }
}

/// A workspace holding `src/a.rs`, `src/b.rs` and the files `extra` (path, contents), and its canonical path.
pub fn source_workspace(extra: &[(&str, &str)]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(ws.join("src/b.rs"), "fn b() {}\n").unwrap();
    for (path, contents) in extra {
        std::fs::write(ws.join(path), contents).unwrap();
    }
    (dir, ws)
}

/// An instance whose commands carry `mark` and run in `ws` by default, with `chain` as its policies (the default
/// chain where `None`).
pub fn instance_in(
    ws: &std::path::Path,
    mark: &str,
    chain: Option<shellward::PolicyChain>,
) -> Shellward {
    let mut config = Config::default();
    config.executor.env.set_var(MARK, mark);
    config.executor.default_workdir = Some(ws.to_path_buf());
    let mut b = Shellward::builder().config(config);
    if let Some(chain) = chain {
        b = b.policy_chain(chain);
    }
    b.build().unwrap()
}
