//! Builds the `shellward-init` crate's `shellward-init-static` binary — the PID-namespace init with no C library,
//! linked statically and position-dependent (about 4 KB) — with a nested cargo invocation into its own target
//! directory, and copies it into `OUT_DIR` for the executor to embed (`sys/linux/embedded_init.rs`).
//!
//! One init starts per namespaced command: this one execs in about a fifth of the time of a dynamically linked Rust
//! program (no loader, no shared libraries, no relocations, no libc start-up). The nested build is the only way to
//! link one binary of the workspace this way: the flags in the outer build would also apply to every other binary.
//!
//! When the build is not possible (not Linux, an architecture the init has no entry point for, an offline registry
//! build that cannot resolve its dependencies), the build prints a warning and the executor falls back to a
//! dynamically linked init (the `shellward-init` binary beside the host's executable, or the executable itself):
//! slower, not weaker.

use std::env;
use std::fs;
use std::path::PathBuf;

const BIN: &str = "shellward-init-static";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(shellward_embedded_init)");
    println!("cargo::rerun-if-env-changed=SHELLWARD_NO_EMBEDDED_INIT");
    println!("cargo::rerun-if-env-changed=SHELLWARD_INIT_TARGET_DIR");
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // The init's entry point (`_start`) and system calls exist for these.
    let supported = os == "linux" && matches!(arch.as_str(), "x86_64" | "aarch64");
    if !supported || env::var_os("SHELLWARD_NO_EMBEDDED_INIT").is_some() {
        return;
    }
    let Some(source) = env::var_os("DEP_SHELLWARD_INIT_ROOT").map(PathBuf::from) else {
        println!(
            "cargo::warning=the shellward-init dependency did not say where its sources are; the executor will use \
             a dynamically linked namespace init"
        );
        return;
    };
    println!("cargo::rerun-if-changed={}", source.join("src").display());
    println!(
        "cargo::rerun-if-changed={}",
        source.join("Cargo.toml").display()
    );
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    match build(&source, &target, &out_dir) {
        Ok(binary) => {
            let copy = out_dir.join(BIN);
            if let Err(e) = fs::copy(&binary, &copy) {
                println!(
                    "cargo::warning=could not copy the static namespace init {} into OUT_DIR ({e}); the executor \
                     will use a dynamically linked init",
                    binary.display()
                );
                return;
            }
            println!("cargo::rustc-cfg=shellward_embedded_init");
            println!(
                "cargo::rustc-env=SHELLWARD_EMBEDDED_INIT={}",
                copy.display()
            );
        }
        Err(why) => println!(
            "cargo::warning=the static namespace init was not built ({why}); the executor will use a dynamically \
             linked init, which starts about 0.7 ms slower per command"
        ),
    }
}

/// Runs the nested build; returns the binary's path.
fn build(
    source: &std::path::Path,
    target: &str,
    out_dir: &std::path::Path,
) -> Result<PathBuf, String> {
    // A workspace checkout shares one directory across profiles and rebuilds; a registry build keeps it in OUT_DIR.
    let root =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR is not set")?)
            .join("../..");
    let target_dir = shellward_build::nested_target_dir("SHELLWARD_INIT_TARGET_DIR", &root, "init")
        .unwrap_or_else(|| out_dir.join("init-build"));
    let mut cmd = shellward_build::nested_cargo(source);
    cmd.arg("--manifest-path")
        .arg(source.join("Cargo.toml"))
        .args([
            "--release",
            "--bin",
            BIN,
            "--features",
            "static-bin",
            "--target",
            target,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        // Small and quick to start: every namespaced command execs it.
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "s")
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "false")
        // Static and position-dependent: without C start files nothing would apply a PIE's relocations. With an
        // explicit --target these flags reach the init only, not the build scripts of its dependencies.
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            "-Ctarget-feature=+crt-static\x1f-Crelocation-model=static",
        );
    let output = cmd
        .output()
        .map_err(|e| format!("could not run {:?}: {e}", shellward_build::cargo()))?;
    if !output.status.success() {
        return Err(format!(
            "cargo build failed: {}",
            shellward_build::failure_tail(&output, 12)
        ));
    }
    let binary = target_dir.join(target).join("release").join(BIN);
    if !binary.is_file() {
        return Err(format!("cargo did not produce {}", binary.display()));
    }
    Ok(binary)
}
