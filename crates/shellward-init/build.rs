//! Tells the build scripts of dependents where this package's sources are (`DEP_SHELLWARD_INIT_ROOT`), so
//! shellward-exec can build the static init binary from them; and, when that binary is built (feature `static-bin`),
//! links it without C start files or libraries: it defines `_start` itself and calls the kernel directly.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo::metadata=root={dir}");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_STATIC_BIN").is_some() {
        for arg in ["-nostartfiles", "-nostdlib", "-static"] {
            println!("cargo::rustc-link-arg-bin=shellward-init-static={arg}");
        }
    }
}
