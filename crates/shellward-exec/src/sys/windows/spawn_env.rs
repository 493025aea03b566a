//! A command's environment on Windows: the executor's base environment and the variables each command adds, with
//! names compared case-insensitively (`Path` and `PATH` are one variable on Windows).

use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::Arc;

/// Whether two variable names are the same variable (ASCII case-insensitive, as Windows compares them).
fn same(a: &OsStr, b: &OsStr) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The executor's base environment: unique names (a later entry replaces an earlier one of the same name).
#[derive(Debug, Default)]
pub(crate) struct BaseEnv {
    pairs: Vec<(OsString, OsString)>,
}

impl BaseEnv {
    /// Prepares `pairs`. An entry with a NUL character, which no environment can carry, is an error naming it.
    pub(crate) fn new(pairs: Vec<(OsString, OsString)>) -> io::Result<BaseEnv> {
        let mut unique: Vec<(OsString, OsString)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            if k.as_encoded_bytes().contains(&0) || v.as_encoded_bytes().contains(&0) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("environment variable {k:?} contains a NUL character"),
                ));
            }
            unique.retain(|(name, _)| !same(name, &k));
            unique.push((k, v));
        }
        Ok(BaseEnv { pairs: unique })
    }
}

/// One command's complete environment: the base, then `extra` (a later entry wins; any replaces the base's
/// variable of its name, whatever its case).
#[derive(Debug)]
pub(crate) struct SpawnEnv {
    base: Arc<BaseEnv>,
    extra: Vec<(OsString, OsString)>,
}

impl SpawnEnv {
    /// The base with `extra` on top.
    pub(crate) fn new(base: Arc<BaseEnv>, extra: Vec<(OsString, OsString)>) -> SpawnEnv {
        SpawnEnv { base, extra }
    }

    /// Every variable once, as it takes effect: the base's not replaced, then the additions (last of each name).
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        let kept = self
            .base
            .pairs
            .iter()
            .filter(|(k, _)| !self.extra.iter().any(|(e, _)| same(e, k)));
        let winning = self
            .extra
            .iter()
            .enumerate()
            .filter(|(i, (k, _))| !self.extra[i + 1..].iter().any(|(later, _)| same(later, k)))
            .map(|(_, kv)| kv);
        kept.chain(winning)
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// An error naming the first addition with a NUL character.
    pub(crate) fn check(&self) -> io::Result<()> {
        match self
            .extra
            .iter()
            .find(|(k, v)| k.as_encoded_bytes().contains(&0) || v.as_encoded_bytes().contains(&0))
        {
            Some((k, _)) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("environment variable {k:?} contains a NUL character"),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names differing only in case are one variable: an addition replaces the base's `Path`, and the last addition
    /// of a name wins.
    #[test]
    fn names_are_one_variable_whatever_their_case() {
        let base = BaseEnv::new(vec![
            ("Path".into(), "C:\\Windows".into()),
            ("TEMP".into(), "C:\\t".into()),
            ("temp".into(), "C:\\u".into()),
        ])
        .unwrap();
        let e = SpawnEnv::new(
            Arc::new(base),
            vec![
                ("PATH".into(), "C:\\bin".into()),
                ("x".into(), "1".into()),
                ("X".into(), "2".into()),
            ],
        );
        let mut got: Vec<String> = e
            .pairs()
            .map(|(k, v)| format!("{}={}", k.to_str().unwrap(), v.to_str().unwrap()))
            .collect();
        got.sort();
        assert_eq!(got, ["PATH=C:\\bin", "X=2", "temp=C:\\u"]);
        assert!(
            SpawnEnv::new(e.base.clone(), vec![("B".into(), "a\0b".into())])
                .check()
                .is_err()
        );
    }
}
