//! Builds the guest policies for `wasm32-wasip2` with a nested cargo invocation (into its own target directory, so
//! the outer build is not blocked), copies them into `OUT_DIR`, and generates constants naming every guest so that
//! each is exercised by a test.
//!
//! In a workspace checkout the built-in policies (`default`, `guard`) are always built from `policies/`. A packaged
//! crate (`cargo package`, crates.io) has no guest sources: it embeds the components committed in `components/`,
//! which the test `committed_components_are_a_build_of_the_sources` proves byte-identical to a build of the
//! sources (the guest build is reproducible: paths are workspace-relative, the cargo home is remapped). After
//! changing a policy, refresh them with `SHELLWARD_UPDATE_COMPONENTS=1 cargo build -p shellward-policy`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

#[path = "build/toolchain_target.rs"]
mod toolchain_target;

/// (package, constant) for every guest built here.
const GUESTS: &[(&str, &str)] = &[
    ("shellward-default-policy", "DEFAULT_POLICY"),
    ("shellward-guard-policy", "GUARD_POLICY"),
    ("shellward-test-policy-scripted", "SCRIPTED_POLICY"),
    ("shellward-test-policy-future", "FUTURE_POLICY"),
];

/// The built-in policies, also committed in `components/` for packaged builds.
const BUILTIN: &[&str] = &["shellward-default-policy", "shellward-guard-policy"];

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "guest";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .join("../..")
        .canonicalize()
        .expect("workspace root");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let committed = manifest_dir.join("components");
    println!("cargo:rerun-if-env-changed=SHELLWARD_UPDATE_COMPONENTS");
    if !root.join("policies/default/Cargo.toml").exists() {
        // A packaged crate: embed the committed components.
        println!("cargo:rerun-if-changed={}", committed.display());
        for package in BUILTIN {
            let file = format!("{}.wasm", package.replace('-', "_"));
            fs::copy(committed.join(&file), out_dir.join(&file)).unwrap_or_else(|e| {
                panic!(
                    "the packaged component {} is missing ({e}); the crate was packaged without its components/",
                    committed.join(&file).display()
                )
            });
        }
        fs::write(out_dir.join("guests.rs"), "").expect("write guests.rs");
        write_builtin_digests(&out_dir);
        return;
    }
    for dir in [
        "wit",
        "crates/shellward-kit",
        "policies/default",
        "policies/guard",
        "policies/testing",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=SHELLWARD_GUEST_TARGET_DIR");

    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    match toolchain_target::ensure(&rustc, "rustup".as_ref(), TARGET) {
        Ok(Some(toolchain)) => println!(
            "cargo:warning=added the {TARGET} target to the Rust toolchain {toolchain} (rustup target add), which \
             rust-toolchain.toml asks for: the built-in policies are compiled for it"
        ),
        Ok(None) => {}
        Err(message) => panic!("{message}"),
    }

    let target_dir =
        shellward_build::nested_target_dir("SHELLWARD_GUEST_TARGET_DIR", &root, "guests")
            .expect("a workspace checkout has a Cargo.toml at its root");
    let mut cmd = shellward_build::nested_cargo(&root);
    cmd.args(["--target", TARGET, "--profile", PROFILE, "--target-dir"])
        .arg(&target_dir);
    for (package, _) in GUESTS {
        cmd.args(["-p", package]);
    }
    // Reproducible: the only absolute paths a guest would hold are the cargo home's (registry sources).
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = cargo_home {
        cmd.env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!("--remap-path-prefix={}=/cargo-home", home.display()),
        );
    }
    let output = cmd.output().unwrap_or_else(|e| {
        panic!(
            "could not run {:?} to build the guest policies: {e}",
            shellward_build::cargo()
        )
    });
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("may not be installed") || stderr.contains("can't find crate for `core`")
        {
            panic!(
                "the {TARGET} target is not installed: run `rustup target add {TARGET}` and build again"
            );
        }
        panic!("building the guest policies for {TARGET} failed:\n{stderr}");
    }

    let mut constants = String::new();
    for (package, constant) in GUESTS {
        let file = format!("{}.wasm", package.replace('-', "_"));
        let built = target_dir.join(TARGET).join(PROFILE).join(&file);
        let copy = out_dir.join(&file);
        fs::copy(&built, &copy).unwrap_or_else(|e| {
            panic!(
                "guest {} was not built at {}: {e}",
                package,
                built.display()
            )
        });
        if BUILTIN.contains(package) && env::var_os("SHELLWARD_UPDATE_COMPONENTS").is_some() {
            fs::create_dir_all(&committed).expect("create components/");
            fs::copy(&built, committed.join(&file)).expect("update components/");
        }
        constants.push_str(&format!(
            "/// Path of the `{package}` component built for {TARGET}.\npub const {constant}: &str = {:?};\n",
            path_str(&copy)
        ));
    }
    fs::write(out_dir.join("guests.rs"), constants).expect("write guests.rs");
    write_builtin_digests(&out_dir);
}

/// `builtin_digests.rs`: the SHA-256 of each built-in component in `OUT_DIR`, in hex, so the binary never hashes its
/// own embedded policies at run time (they key the precompile cache and are shown by `policy list`).
fn write_builtin_digests(out_dir: &Path) {
    use sha2::{Digest, Sha256};
    let mut out = String::from(
        "/// SHA-256 (hex) of each built-in component, by package, computed by the build script.\n",
    );
    out.push_str("pub(crate) const BUILTIN_SHA256: &[(&str, &str)] = &[\n");
    for package in BUILTIN {
        let file = format!("{}.wasm", package.replace('-', "_"));
        let bytes = fs::read(out_dir.join(&file)).expect("read a built-in component");
        let hex: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        out.push_str(&format!("    ({package:?}, {hex:?}),\n"));
    }
    out.push_str("];\n");
    fs::write(out_dir.join("builtin_digests.rs"), out).expect("write builtin_digests.rs");
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("OUT_DIR is not UTF-8")
}
