//! The precompile cache: hits after the first load, and corrupted entries are discarded and rebuilt.

use shellward_policy::cache::{Cache, CacheOutcome};
use shellward_policy::embedded::DEFAULT_POLICY_WASM;
use shellward_policy::{Outcome, PolicyEngine, Request, SandboxConfig};

#[test]
fn entries_are_reused_and_corruption_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let engine = PolicyEngine::new(SandboxConfig {
        cache_dir: Some(dir.path().into()),
        ..Default::default()
    })
    .unwrap();
    let (_, first) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
    assert_eq!(first, CacheOutcome::Miss);
    let (_, second) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
    assert_eq!(second, CacheOutcome::Hit);

    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    let good = std::fs::read(entry).unwrap();

    // Truncated, bit-flipped, emptied and foreign entries are all discarded and rebuilt.
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    for bad in [
        good[..good.len() / 3].to_vec(),
        flipped,
        Vec::new(),
        b"SWPCACH1garbage".to_vec(),
    ] {
        std::fs::write(entry, &bad).unwrap();
        let (component, outcome) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
        assert_eq!(outcome, CacheOutcome::Rebuilt);
        drop(component);
        assert_eq!(
            std::fs::read(entry).unwrap(),
            good,
            "the entry is rewritten intact"
        );
    }
    // And the policy still works after a rebuild.
    let policy = engine.load_default("").unwrap();
    assert!(matches!(
        policy.evaluate(&Request::new("ls")).unwrap(),
        Outcome::Run(_)
    ));
}

#[test]
fn an_unwritable_cache_directory_does_not_fail_the_load() {
    let file = tempfile::NamedTempFile::new().unwrap();
    // A directory path below a regular file cannot be created.
    let cache = Cache::new(file.path().join("sub"));
    let engine = PolicyEngine::new(SandboxConfig {
        cache_dir: Some(cache.dir().into()),
        ..Default::default()
    })
    .unwrap();
    let (_, outcome) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
}
