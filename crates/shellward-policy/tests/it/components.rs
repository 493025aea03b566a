//! The components committed in `components/` (embedded by a packaged crate, which has no guest sources) are exactly
//! what the sources build to, so a crate from `cargo package` behaves like a workspace build.

use shellward_policy::embedded::guests;
use std::path::Path;

#[test]
fn committed_components_are_a_build_of_the_sources() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("components");
    for built in [guests::DEFAULT_POLICY, guests::GUARD_POLICY] {
        let name = Path::new(built).file_name().unwrap();
        let committed = std::fs::read(dir.join(name))
            .unwrap_or_else(|e| panic!("components/{} is missing ({e})", name.to_string_lossy()));
        let fresh = std::fs::read(built).unwrap();
        assert!(
            committed == fresh,
            "components/{} differs from a build of its sources: run \
             `SHELLWARD_UPDATE_COMPONENTS=1 cargo build -p shellward-policy` and commit components/",
            name.to_string_lossy()
        );
    }
}
