//! Policies from an OCI registry, against a real registry on loopback: Debian's `docker-registry` (the CNCF
//! distribution registry), started by the test with a temporary configuration and stopped after. Push the guard, pull
//! it into a clean cache, load it from a config by pinned reference (and from the cache once the registry is gone),
//! and refuse a tampered component or a digest that does not match.

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::text;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The registry binary: `$SHELLWARD_TEST_REGISTRY`, else `docker-registry` on PATH, else Debian's package fetched
/// with `apt-get download` and unpacked under the target directory (no root needed, done once).
fn registry_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SHELLWARD_TEST_REGISTRY") {
        return PathBuf::from(p);
    }
    if let Some(found) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("docker-registry"))
            .find(|p| p.is_file())
    }) {
        return found;
    }
    let dir = shellward_test_support::python::target_dir().join("docker-registry");
    let unpacked = dir.join("root/usr/bin/docker-registry");
    if unpacked.is_file() {
        return unpacked;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let fetched = Command::new("apt-get")
        .args(["download", "docker-registry"])
        .current_dir(&dir)
        .output();
    let deb = std::fs::read_dir(&dir).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
    });
    if let Some(deb) = deb {
        let status = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(dir.join("root"))
            .status();
        if status.is_ok_and(|s| s.success()) && unpacked.is_file() {
            return unpacked;
        }
    }
    panic!(
        "the OCI tests need a registry and could not fetch one ({}): install Debian's docker-registry package \
         (`apt-get install docker-registry`; .ci/run does) or set SHELLWARD_TEST_REGISTRY to a registry binary",
        match fetched {
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => e.to_string(),
        }
    )
}

/// A registry on a free loopback port, storing under `root`; killed when dropped.
struct Registry {
    child: Child,
    address: String,
    root: PathBuf,
}

impl Registry {
    fn start(dir: &Path) -> Registry {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let root = dir.join("storage");
        let config = crate::cli::write_file(
            dir,
            "registry.yml",
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                root.display()
            ),
        );
        let child = Command::new(registry_binary())
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the registry");
        let registry = Registry {
            child,
            address,
            root,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let url = format!("http://{}/v2/", registry.address);
        while ureq::get(&url).call().is_err() {
            assert!(
                Instant::now() < deadline,
                "the registry did not answer on {url}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `shellward ARGS` to its end with its own policy cache.
fn shellward(args: &[&str], cache: &Path) -> Output {
    crate::cli::shellward(args)
        .env("SHELLWARD_CACHE_DIR", cache)
        .output()
        .unwrap()
}

#[test]
fn push_pull_load_and_refuse_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(dir.path());
    let guard = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shellward-policy/components/shellward_guard_policy.wasm");
    let tag = format!("{}/shellward/guard:1.0", registry.address);

    let cache = dir.path().join("cache");
    let pushed = shellward(&["policy", "push", guard.to_str().unwrap(), &tag], &cache);
    assert!(pushed.status.success(), "{}", text(&pushed));
    let pinned = String::from_utf8_lossy(&pushed.stdout).trim().to_string();
    assert!(
        pinned.starts_with(&format!("{}/shellward/guard@sha256:", registry.address)),
        "{pinned}"
    );

    // Pull the tag into a clean cache: the same bytes, the same pinned reference.
    let pulled = shellward(&["policy", "pull", &tag], &cache);
    assert!(pulled.status.success(), "{}", text(&pulled));
    let out = String::from_utf8_lossy(&pulled.stdout).to_string();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], pinned, "{out}");
    assert_eq!(
        std::fs::read(lines[0]).unwrap(),
        std::fs::read(&guard).unwrap()
    );

    // A config names it by pinned reference; it decides like the built-in guard.
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        format!("[[policy]]\noci = \"{pinned}\"\n"),
    );
    let check = shellward(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--",
            "rm -rf /",
        ],
        &cache,
    );
    assert_eq!(check.status.code(), Some(126), "{}", text(&check));
    assert!(text(&check).contains("guard[rm-root]"), "{}", text(&check));
    let list = shellward(
        &[
            "policy",
            "list",
            "--config",
            config.to_str().unwrap(),
            "--json",
        ],
        &cache,
    );
    assert!(list.status.success(), "{}", text(&list));
    assert!(
        text(&list).contains(&format!("oci:{pinned}")),
        "{}",
        text(&list)
    );

    // A digest that does not match is refused.
    let wrong = format!(
        "{}/shellward/guard@sha256:{}",
        registry.address,
        "0".repeat(64)
    );
    let refused = shellward(&["policy", "pull", &wrong], &dir.path().join("cache2"));
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));

    // A tampered component in the registry's storage is refused, and nothing is cached.
    let layer = sha256_hex(&std::fs::read(&guard).unwrap());
    let blob = registry
        .root
        .join("docker/registry/v2/blobs/sha256")
        .join(&layer[..2])
        .join(&layer)
        .join("data");
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let tampered_cache = dir.path().join("cache3");
    let tampered = shellward(&["policy", "pull", &tag], &tampered_cache);
    assert_eq!(tampered.status.code(), Some(1), "{}", text(&tampered));
    assert!(
        text(&tampered).to_lowercase().contains("digest"),
        "{}",
        text(&tampered)
    );
    assert_eq!(
        files_below(&tampered_cache),
        Vec::<PathBuf>::new(),
        "a refused component must not be cached"
    );

    // With the registry gone, the pinned reference loads from the cache.
    drop(registry);
    let offline = shellward(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--",
            "sudo reboot",
        ],
        &cache,
    );
    assert_eq!(offline.status.code(), Some(126), "{}", text(&offline));
    assert!(
        text(&offline).contains("guard[privilege]"),
        "{}",
        text(&offline)
    );
}

/// Every file below `dir` (none when it does not exist).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .flat_map(|e| {
                    let p = e.path();
                    if p.is_dir() { files_below(&p) } else { vec![p] }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The SHA-256 of `bytes` in hex, as a registry names a blob.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
