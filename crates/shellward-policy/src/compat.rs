//! What a component declares (its exports and imports) and whether it fits this host's contract.

use crate::error::PolicyError;
use crate::host::ALLOWED_IMPORTS;
use wasmtime::Engine;
use wasmtime::component::Component;

/// The WIT package policies implement.
pub const WIT_PACKAGE: &str = "shellward:policy";
/// The WIT package version this host was built with (see `wit/v0.4/policy.wit`).
pub const WIT_VERSION: &str = "0.4.0";

/// Earlier versions this host still loads, each through an adapter (frozen in `wit/v0.3/`, `wit/v0.2/`, `wit/v0.1/`), newest
/// first.
pub const ADAPTED_WIT_VERSIONS: &[&str] = &["0.3.0", "0.2.0", "0.1.0"];

/// The name of the exported policy interface, without version.
const POLICY_INTERFACE: &str = "shellward:policy/policy";

/// What a component declares.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyInfo {
    /// Export names, e.g. `shellward:policy/policy@0.1.0`.
    pub exports: Vec<String>,
    /// Import names, e.g. `shellward:policy/host@0.1.0`, `wasi:cli/environment@0.2.6`.
    pub imports: Vec<String>,
    /// The contract version the policy was built against, when it exports the policy interface.
    pub wit_version: Option<String>,
}

/// Whether `found` is semver-compatible with `supported`: same major, and for `0.x` the same minor.
pub(crate) fn compatible(found: &str, supported: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut it = v.split(['.', '-', '+']);
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parse(found), parse(supported)) {
        (Some((fa, fb)), Some((sa, sb))) => fa == sa && (fa > 0 || fb == sb),
        _ => false,
    }
}

/// The compatible range as text (`0.1.x`, `1.x`).
pub(crate) fn compatible_range(supported: &str) -> String {
    let mut it = supported.split('.');
    match (it.next(), it.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}.x"),
        (Some(major), _) => format!("{major}.x"),
        _ => supported.to_string(),
    }
}

/// The contract version `found` is loaded as: the current one, or an adapted earlier one.
fn loaded_as(found: &str) -> Option<&'static str> {
    std::iter::once(WIT_VERSION)
        .chain(ADAPTED_WIT_VERSIONS.iter().copied())
        .find(|v| compatible(found, v))
}

/// Every range this host loads, as text: `0.4.x (and 0.3.x, 0.2.x, 0.1.x through an adapter)`.
pub fn supported_ranges() -> String {
    let adapted: Vec<String> = ADAPTED_WIT_VERSIONS
        .iter()
        .map(|v| compatible_range(v))
        .collect();
    if adapted.is_empty() {
        compatible_range(WIT_VERSION)
    } else {
        format!(
            "{} (and {} through an adapter)",
            compatible_range(WIT_VERSION),
            adapted.join(", ")
        )
    }
}

impl PolicyInfo {
    /// The earlier contract version (`0.3.0`, `0.2.0`, `0.1.0`) the policy targets and runs through the host's adapter from;
    /// `None` for the current contract, or one this host does not load.
    pub fn adapted_from(&self) -> Option<&'static str> {
        self.loaded_as().filter(|v| *v != WIT_VERSION)
    }

    /// The contract version the policy is loaded as (the current one or an adapted one); `None` when this host does
    /// not load its version.
    pub(crate) fn loaded_as(&self) -> Option<&'static str> {
        self.wit_version.as_deref().and_then(loaded_as)
    }

    /// Reads what `component` declares.
    pub fn of(engine: &Engine, component: &Component) -> PolicyInfo {
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let wit_version = exports.iter().find_map(|e| {
            let (iface, version) = e.split_once('@')?;
            (iface == POLICY_INTERFACE).then(|| version.to_string())
        });
        PolicyInfo {
            exports,
            imports,
            wit_version,
        }
    }

    /// Whether the policy can run on this host; the error says why not.
    pub fn check(&self, name: &str) -> Result<(), PolicyError> {
        let supported = format!("{WIT_PACKAGE}/policy@{WIT_VERSION}");
        let target = match &self.wit_version {
            Some(v) => match loaded_as(v) {
                Some(t) => t,
                None => {
                    return Err(PolicyError::Incompatible {
                        name: name.to_string(),
                        found: format!("{POLICY_INTERFACE}@{v}"),
                        supported,
                        compatible: supported_ranges(),
                    });
                }
            },
            None => {
                return Err(PolicyError::MissingExport {
                    name: name.to_string(),
                    expected: supported,
                    exports: if self.exports.is_empty() {
                        "nothing".to_string()
                    } else {
                        self.exports.join(", ")
                    },
                });
            }
        };
        if let Some(bad) = self
            .imports
            .iter()
            .find(|i| !ALLOWED_IMPORTS.iter().any(|p| i.starts_with(p)))
        {
            return Err(PolicyError::Link {
                name: name.to_string(),
                message: format!(
                    "it imports {bad}, which shellward does not grant; a policy may import only {WIT_PACKAGE}/host \
                     and the WASI interfaces a standard library pulls in (they grant no filesystem, network, \
                     environment or clock)"
                ),
            });
        }
        // Its host imports must be of the same contract version as its export.
        if let Some(bad) = self.imports.iter().find(|i| {
            i.starts_with("shellward:policy/")
                && !i
                    .split_once('@')
                    .is_some_and(|(_, v)| compatible(v, target))
        }) {
            return Err(PolicyError::Incompatible {
                name: name.to_string(),
                found: bad.clone(),
                supported: format!("{WIT_PACKAGE}/host@{target}"),
                compatible: compatible_range(target),
            });
        }
        Ok(())
    }
}

/// Classifies raw bytes before compiling them, so the common mistakes get a precise error.
pub(crate) fn check_header(name: &str, bytes: &[u8]) -> Result<(), PolicyError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(PolicyError::NotWasm {
            name: name.to_string(),
        });
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(PolicyError::CoreModule {
            name: name.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_compatibility() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.7", "0.1.0"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(!compatible("1.0.0", "0.1.0"));
        assert!(compatible("1.4.0", "1.0.0"));
        assert!(!compatible("2.0.0", "1.0.0"));
        assert!(!compatible("x", "0.1.0"));
        assert_eq!(compatible_range("0.1.0"), "0.1.x");
        assert_eq!(compatible_range("2.3.0"), "2.x");
    }

    #[test]
    fn wit_version_matches_the_wit_file() {
        let wit = include_str!("../wit/v0.4/policy.wit");
        assert!(wit.contains(&format!("package {WIT_PACKAGE}@{WIT_VERSION};")));
        for (frozen, version) in [
            (
                include_str!("../wit/v0.3/policy.wit"),
                ADAPTED_WIT_VERSIONS[0],
            ),
            (
                include_str!("../wit/v0.2/policy.wit"),
                ADAPTED_WIT_VERSIONS[1],
            ),
            (
                include_str!("../wit/v0.1/policy.wit"),
                ADAPTED_WIT_VERSIONS[2],
            ),
        ] {
            assert!(frozen.contains(&format!("package {WIT_PACKAGE}@{version};")));
            assert!(frozen.starts_with("/// FROZEN"), "{version}");
        }
    }

    #[test]
    fn earlier_versions_load_through_the_adapter_and_others_are_refused() {
        assert_eq!(loaded_as("0.4.1"), Some("0.4.0"));
        assert_eq!(loaded_as("0.3.1"), Some("0.3.0"));
        assert_eq!(loaded_as("0.2.3"), Some("0.2.0"));
        assert_eq!(loaded_as("0.1.0"), Some("0.1.0"));
        assert_eq!(loaded_as("0.5.0"), None);
        assert_eq!(loaded_as("1.0.0"), None);
        assert_eq!(
            supported_ranges(),
            "0.4.x (and 0.3.x, 0.2.x, 0.1.x through an adapter)"
        );
    }

    #[test]
    fn headers_are_classified() {
        assert!(matches!(
            check_header("x", b"hello world"),
            Err(PolicyError::NotWasm { .. })
        ));
        assert!(matches!(
            check_header("x", b"\0asm\x01\0\0\0"),
            Err(PolicyError::CoreModule { .. })
        ));
        assert!(check_header("x", b"\0asm\x0d\0\x01\0").is_ok());
    }
}
