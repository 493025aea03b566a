//! Helpers for deciding what a command may touch (contract 0.3's `confinement`): whether a path is beneath another,
//! narrowing a writable list to a directory, and matching a destination against allow-list entries — the same rules
//! the host applies, so a policy's narrowing is never refused as a widening by a different reading of a path.
//!
//! Paths are compared by whole components (`/srv2` is not beneath `/srv`); a path with `.` or `..` components is never
//! beneath anything (the host refuses such a writable path).

/// Whether `path` is `base` or beneath it. Both must be absolute and free of `.`/`..` components.
pub fn beneath(path: &str, base: &str) -> bool {
    let clean = |p: &str| p.starts_with('/') && !p.split('/').any(|s| s == "." || s == "..");
    if !clean(path) || !clean(base) {
        return false;
    }
    fn parts(p: &str) -> Vec<&str> {
        p.split('/').filter(|s| !s.is_empty()).collect()
    }
    let (p, b) = (parts(path), parts(base));
    p.len() >= b.len() && p[..b.len()] == b[..]
}

/// `writable` narrowed to `dir`: the entries beneath `dir`, and `dir` itself when it is beneath an entry (so writes
/// stay possible there). Never wider than `writable`; `None` (unconfined) narrows to `dir` alone.
pub fn narrow_to(writable: Option<&[String]>, dir: &str) -> Vec<String> {
    let Some(list) = writable else {
        return vec![dir.to_string()];
    };
    let mut out: Vec<String> = list.iter().filter(|w| beneath(w, dir)).cloned().collect();
    if list.iter().any(|w| beneath(dir, w)) && !out.iter().any(|o| o == dir) {
        out.insert(0, dir.to_string());
    }
    out
}

/// Whether the allow-list `entries` (`host`, `*.domain`, each with an optional `:port`) lets a command reach
/// `host:port`, as the host's proxy decides it (case-insensitive; `*.domain` matches subdomains only).
pub fn allows(entries: &[String], host: &str, port: u16) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    entries.iter().any(|e| {
        let (h, p) = match e.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().ok()),
            None => (e.as_str(), None),
        };
        let h = h.to_ascii_lowercase();
        let port_ok = !e.contains(':') || p == Some(port);
        let host_ok = match h.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => host == h,
        };
        host_ok && port_ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_compare_by_component_and_never_through_dot_dot() {
        assert!(beneath("/srv/app", "/srv") && beneath("/srv", "/srv") && beneath("/x", "/"));
        assert!(
            !beneath("/srv2", "/srv") && !beneath("/srv/../etc", "/srv") && !beneath("rel", "/")
        );
        let list = vec![
            "/w".to_string(),
            "/w/app/cache".to_string(),
            "/tmp".to_string(),
        ];
        assert_eq!(narrow_to(Some(&list), "/w/app"), ["/w/app", "/w/app/cache"]);
        assert_eq!(narrow_to(Some(&list), "/elsewhere"), Vec::<String>::new());
        assert_eq!(narrow_to(None, "/w/app"), ["/w/app"]);
    }

    #[test]
    fn destinations_match_like_the_proxy() {
        let list = vec!["pypi.org".to_string(), "*.npmjs.org:443".to_string()];
        assert!(allows(&list, "PyPI.org", 80) && allows(&list, "registry.npmjs.org", 443));
        assert!(!allows(&list, "npmjs.org", 443) && !allows(&list, "registry.npmjs.org", 80));
        assert!(!allows(&list, "evilpypi.org", 443));
    }
}
