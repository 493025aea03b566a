//! The precompile cache: hits after the first load; corrupted, swapped and forged entries are discarded and rebuilt,
//! never run; a key others could read or write disables the cache.

use shellward_policy::cache::{Cache, CacheOutcome};
use shellward_policy::embedded::DEFAULT_POLICY_WASM;
use shellward_policy::{Outcome, PolicyEngine, Request, SandboxConfig};

#[test]
fn entries_are_reused_and_corruption_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        PolicyEngine::new(SandboxConfig::default().cache_dir(Some(dir.path().into()))).unwrap();
    let (_, first) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
    assert_eq!(first, CacheOutcome::Miss);
    let (_, second) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
    assert_eq!(second, CacheOutcome::Hit);

    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
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
    let engine =
        PolicyEngine::new(SandboxConfig::default().cache_dir(Some(cache.dir().into()))).unwrap();
    // No key can be made there, so nothing is cached: the policy is compiled in memory.
    let (_, outcome) = engine.compile("default", DEFAULT_POLICY_WASM).unwrap();
    assert_eq!(outcome, CacheOutcome::Disabled);
}

#[test]
fn the_directory_is_trimmed_to_its_size_limit_least_recently_used_first() {
    use std::time::{Duration, UNIX_EPOCH};
    let dir = tempfile::tempdir().unwrap();
    let engine = wasmtime::Engine::default();
    let default = DEFAULT_POLICY_WASM.to_vec();
    let guard = shellward_policy::embedded::builtin("guard")
        .unwrap()
        .to_vec();
    let scripted = std::fs::read(shellward_policy::embedded::guests::SCRIPTED_POLICY).unwrap();
    let unbounded = Cache::new(dir.path());
    let path = |bytes: &[u8]| unbounded.entry_path(&engine, bytes);
    let size = |bytes: &[u8]| std::fs::metadata(path(bytes)).unwrap().len();
    let load = |cache: &Cache, bytes: &[u8]| cache.load(&engine, bytes).unwrap().1;
    assert_eq!(load(&unbounded, &default), CacheOutcome::Miss);
    assert_eq!(load(&unbounded, &guard), CacheOutcome::Miss);
    // Both were written long ago, the default first; then the default is used again (a hit refreshes it).
    let written_at = |bytes: &[u8], secs: u64| {
        std::fs::File::options()
            .write(true)
            .open(path(bytes))
            .unwrap()
            .set_modified(UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap()
    };
    written_at(&default, 1_000);
    written_at(&guard, 2_000);
    assert_eq!(load(&unbounded, &default), CacheOutcome::Hit);

    // Room for all three but one byte: writing the third removes the least recently used one, the guard.
    let elsewhere = tempfile::tempdir().unwrap();
    assert_eq!(
        load(&Cache::new(elsewhere.path()), &scripted),
        CacheOutcome::Miss
    );
    let scripted_size =
        std::fs::metadata(Cache::new(elsewhere.path()).entry_path(&engine, &scripted))
            .unwrap()
            .len();
    let limit = size(&default) + size(&guard) + scripted_size - 1;
    let bounded = Cache::new(dir.path()).with_size_limit(limit);
    assert_eq!(load(&bounded, &scripted), CacheOutcome::Miss);
    assert!(path(&default).exists(), "the recently used entry stays");
    assert!(path(&scripted).exists(), "the entry just written stays");
    assert!(
        !path(&guard).exists(),
        "the least recently used entry is removed"
    );
    assert_eq!(load(&unbounded, &default), CacheOutcome::Hit);

    // Files that are not entries are neither counted nor removed; an entry alone over the limit still stays.
    std::fs::write(dir.path().join("notes.txt"), vec![b'x'; 4096]).unwrap();
    let tiny = Cache::new(dir.path()).with_size_limit(1);
    assert_eq!(load(&tiny, &guard), CacheOutcome::Miss);
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    left.sort();
    let mut want = vec![
        dir.path().join("notes.txt"),
        path(&guard),
        unbounded.key_path(),
    ];
    want.sort();
    assert_eq!(left, want);
}

#[test]
fn a_hit_refreshes_an_entry_s_time_only_when_it_is_an_hour_old() {
    use std::time::{Duration, SystemTime};
    let dir = tempfile::tempdir().unwrap();
    let engine = wasmtime::Engine::default();
    let cache = Cache::new(dir.path());
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Miss
    );
    let path = cache.entry_path(&engine, DEFAULT_POLICY_WASM);
    let set = |t: SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(t)
            .unwrap()
    };
    let modified = || std::fs::metadata(&path).unwrap().modified().unwrap();
    // Used ten minutes ago: a hit writes nothing.
    let recent = SystemTime::now() - Duration::from_secs(600);
    set(recent);
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Hit
    );
    assert_eq!(modified(), recent);
    // Used two hours ago: the hit moves it to the end of the eviction order.
    set(SystemTime::now() - Duration::from_secs(7200));
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Hit
    );
    let age = modified().elapsed().unwrap_or_default();
    assert!(age < Duration::from_secs(60), "refreshed {age:?} ago");
}

/// The attack the MAC exists for: an entry that is valid for another component (the default policy allows `rm -rf
/// /`, the guard denies it) copied over the guard's entry name must not be loaded as the guard.
#[test]
fn another_component_s_entry_copied_over_this_one_is_recompiled_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let engine = wasmtime::Engine::default();
    let cache = Cache::new(dir.path());
    let guard = shellward_policy::embedded::builtin("guard").unwrap();
    assert_eq!(cache.load(&engine, guard).unwrap().1, CacheOutcome::Miss);
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Miss
    );
    let guard_entry = cache.entry_path(&engine, guard);
    std::fs::copy(cache.entry_path(&engine, DEFAULT_POLICY_WASM), &guard_entry).unwrap();
    assert_eq!(
        cache.load(&engine, guard).unwrap().1,
        CacheOutcome::Rebuilt,
        "the swapped entry is refused"
    );
    // And through the engine: the guard loaded from the repaired cache still denies.
    std::fs::copy(cache.entry_path(&engine, DEFAULT_POLICY_WASM), &guard_entry).unwrap();
    let policy_engine =
        PolicyEngine::new(SandboxConfig::default().cache_dir(Some(dir.path().into()))).unwrap();
    let policy = policy_engine.load_builtin("guard", "").unwrap().unwrap();
    assert!(
        matches!(
            policy.evaluate(&Request::new("rm -rf /")).unwrap(),
            Outcome::Deny(_)
        ),
        "the guard, not the default policy, answered"
    );
}

/// Someone who can write the cache but not read the key (a command in the sandbox, where the key is hidden) cannot
/// make an entry the host accepts, even with a well-formed trailer.
#[test]
fn an_entry_made_under_another_key_is_refused() {
    let engine = wasmtime::Engine::default();
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let cache = Cache::new(ours.path());
    let forger = Cache::new(theirs.path());
    assert_eq!(
        forger.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Miss
    );
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Miss
    );
    assert_ne!(
        std::fs::read(cache.key_path()).unwrap(),
        std::fs::read(forger.key_path()).unwrap(),
        "each cache draws its own key"
    );
    std::fs::copy(
        forger.entry_path(&engine, DEFAULT_POLICY_WASM),
        cache.entry_path(&engine, DEFAULT_POLICY_WASM),
    )
    .unwrap();
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Rebuilt
    );
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Hit
    );
}

#[cfg(unix)]
#[test]
fn a_key_others_can_read_or_that_is_not_a_key_disables_the_cache() {
    use std::os::unix::fs::PermissionsExt;
    let engine = wasmtime::Engine::default();
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path());
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Miss
    );
    let key = cache.key_path();
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Disabled,
        "a world-readable key is not trusted"
    );
    std::fs::remove_file(&key).unwrap();
    std::fs::write(&key, b"short").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Disabled
    );
    std::fs::remove_file(&key).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &key).unwrap();
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Disabled,
        "a symbolic link is not followed"
    );
    // Removing it is the fix the warning names: a new key, and the old entries (under the old key) are rebuilt.
    std::fs::remove_file(&key).unwrap();
    assert_eq!(
        cache.load(&engine, DEFAULT_POLICY_WASM).unwrap().1,
        CacheOutcome::Rebuilt
    );
}
