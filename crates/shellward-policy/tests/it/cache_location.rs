//! Tests keep what they compile out of the user's cache: the workspace's `.cargo/config.toml` gives every process
//! cargo runs `SHELLWARD_CACHE_DIR` under `target/`, so a test run never fills `~/.cache/shellward`.

#[test]
fn tests_compile_policies_into_a_cache_under_target() {
    let dir = shellward_policy::cache::default_dir().expect("a cache directory");
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target")
        .canonicalize()
        .expect("the workspace's target directory");
    assert!(
        dir.starts_with(&target),
        "the policy cache of a test run is {}, not under {}: set SHELLWARD_CACHE_DIR in .cargo/config.toml's [env]",
        dir.display(),
        target.display()
    );
    if let Some(home) = dirs::cache_dir() {
        assert!(!dir.starts_with(home), "{}", dir.display());
    }
}
