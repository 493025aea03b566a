//! A command's environment as the spawn path needs it (Linux's, and through `sys/bsd` macOS's and FreeBSD's): the executor's base environment, turned into `NAME=value`
//! C strings once when the executor is made, and the few variables each command adds (its tree marker, the
//! plan's own variables).
//!
//! Building every command's environment from scratch — copying the base's thirty-odd variables, sorting them into a
//! map, allocating a C string for each — took about 25 µs of every spawn's critical path here; now a spawn
//! allocates only its own additions and an array of pointers.

use std::ffi::{CString, OsStr, OsString, c_char};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// The executor's base environment, prepared once: unique names, each with its `NAME=value` C string.
#[derive(Debug, Default)]
pub(crate) struct BaseEnv {
    pairs: Vec<(OsString, OsString)>,
    entries: Vec<CString>,
}

impl BaseEnv {
    /// Prepares `pairs` (a later entry replaces an earlier one of the same name). An entry with a NUL byte, which
    /// no environment can carry, is an error naming it.
    pub(crate) fn new(pairs: Vec<(OsString, OsString)>) -> io::Result<BaseEnv> {
        let mut unique: Vec<(OsString, OsString)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            unique.retain(|(name, _)| *name != k);
            unique.push((k, v));
        }
        let entries = unique
            .iter()
            .map(|(k, v)| entry(k, v))
            .collect::<io::Result<_>>()?;
        Ok(BaseEnv {
            pairs: unique,
            entries,
        })
    }
}

/// `NAME=value` as a C string.
fn entry(k: &OsStr, v: &OsStr) -> io::Result<CString> {
    let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
    kv.extend_from_slice(k.as_bytes());
    kv.push(b'=');
    kv.extend_from_slice(v.as_bytes());
    CString::new(kv).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("environment variable {k:?} contains a NUL byte"),
        )
    })
}

/// One command's complete environment: the base, then `extra` (a later entry wins; any replaces the base's
/// variable of its name). Nothing of the executor's own environment is added beyond the base.
#[derive(Debug)]
pub(crate) struct SpawnEnv {
    base: Arc<BaseEnv>,
    extra: Vec<(OsString, OsString)>,
}

/// An `envp` array and the C strings it points to that are not the base's.
pub(crate) struct Envp {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl Envp {
    /// The NULL-terminated pointer array.
    // Only Linux's fast spawn path uses it.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn ptrs(&self) -> &[*const c_char] {
        &self.ptrs
    }
}

impl SpawnEnv {
    /// The base with `extra` on top.
    pub(crate) fn new(base: Arc<BaseEnv>, extra: Vec<(OsString, OsString)>) -> SpawnEnv {
        SpawnEnv { base, extra }
    }

    /// Adds (or replaces) one variable.
    // Only Linux's fast spawn path uses it.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn push(&mut self, name: OsString, value: OsString) {
        self.extra.push((name, value));
    }

    /// The value of `name`.
    // Only Linux's fast spawn path uses it.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn get(&self, name: &str) -> Option<&OsStr> {
        let name = OsStr::new(name);
        self.extra
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .or_else(|| self.base.pairs.iter().find(|(k, _)| k == name))
            .map(|(_, v)| v.as_os_str())
    }

    /// The base's entries (index, pair) that no addition replaces.
    fn kept_base(&self) -> impl Iterator<Item = (usize, &(OsString, OsString))> {
        self.base
            .pairs
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| !self.extra.iter().any(|(e, _)| e == k))
    }

    /// The additions that take effect: the last of each name.
    fn winning_extra(&self) -> impl Iterator<Item = &(OsString, OsString)> {
        self.extra
            .iter()
            .enumerate()
            .filter(|(i, (k, _))| !self.extra[i + 1..].iter().any(|(later, _)| later == k))
            .map(|(_, kv)| kv)
    }

    /// Every variable once, as it takes effect: the base's not replaced, then the additions (last of each name).
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.kept_base()
            .map(|(_, kv)| kv)
            .chain(self.winning_extra())
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The `envp` array for `execve`; valid while `self` lives (it points into the base's C strings).
    pub(crate) fn envp(&self) -> io::Result<Envp> {
        let mut ptrs: Vec<*const c_char> = self
            .kept_base()
            .map(|(i, _)| self.base.entries[i].as_ptr())
            .collect();
        let owned: Vec<CString> = self
            .winning_extra()
            .map(|(k, v)| entry(k, v))
            .collect::<io::Result<_>>()?;
        // The strings' heap buffers do not move when `owned` is moved into the result.
        ptrs.extend(owned.iter().map(|c| c.as_ptr()));
        ptrs.push(std::ptr::null());
        Ok(Envp {
            _owned: owned,
            ptrs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(base: &[(&str, &str)], extra: &[(&str, &str)]) -> SpawnEnv {
        let own = |v: &[(&str, &str)]| v.iter().map(|(k, v)| (k.into(), v.into())).collect();
        SpawnEnv::new(Arc::new(BaseEnv::new(own(base)).unwrap()), own(extra))
    }

    fn envp_strings(e: &SpawnEnv) -> Vec<String> {
        let envp = e.envp().unwrap();
        let ptrs = envp.ptrs();
        assert!(ptrs.last().unwrap().is_null(), "NULL-terminated");
        ptrs[..ptrs.len() - 1]
            .iter()
            .map(|&p| {
                // SAFETY: every pointer but the last is a C string owned by `envp` or the base, both alive here.
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    /// Each name appears once, with the value that takes effect: a later addition over an earlier one, any
    /// addition over the base, a later base entry over an earlier one.
    #[test]
    fn each_variable_appears_once_with_the_value_that_wins() {
        let e = env(
            &[
                ("PATH", "/bin"),
                ("HOME", "/root"),
                ("LANG", "C"),
                ("HOME", "/home/x"),
            ],
            &[("LANG", "en"), ("T", "1"), ("LANG", "de")],
        );
        let mut got = envp_strings(&e);
        got.sort();
        assert_eq!(got, ["HOME=/home/x", "LANG=de", "PATH=/bin", "T=1"]);
        let mut pairs: Vec<String> = e
            .pairs()
            .map(|(k, v)| format!("{}={}", k.to_str().unwrap(), v.to_str().unwrap()))
            .collect();
        pairs.sort();
        assert_eq!(pairs, got, "the portable path sees the same environment");
        assert_eq!(e.get("LANG"), Some(OsStr::new("de")));
        assert_eq!(e.get("HOME"), Some(OsStr::new("/home/x")));
        assert_eq!(e.get("NOPE"), None);
    }

    /// A NUL byte in an addition is an error naming the variable, not a truncated value.
    #[test]
    fn a_nul_byte_is_an_error_naming_the_variable() {
        let e = env(&[("PATH", "/bin")], &[("BAD", "a\0b")]);
        let err = e.envp().err().expect("refused");
        assert!(err.to_string().contains("BAD"), "{err}");
        assert!(BaseEnv::new(vec![("X".into(), "\0".into())]).is_err());
    }
}
