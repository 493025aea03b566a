//! A command's environment: the executor's base, then the variables each command adds (a later one wins).

use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::Arc;

/// The executor's base environment: unique names, a later entry replacing an earlier one.
#[derive(Debug, Default)]
pub(crate) struct BaseEnv {
    pairs: Vec<(OsString, OsString)>,
}

impl BaseEnv {
    /// Prepares `pairs`; an entry with a NUL byte, which no environment can carry, is an error naming it.
    pub(crate) fn new(pairs: Vec<(OsString, OsString)>) -> io::Result<BaseEnv> {
        let mut unique: Vec<(OsString, OsString)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            check(&k, &v)?;
            unique.retain(|(name, _)| *name != k);
            unique.push((k, v));
        }
        Ok(BaseEnv { pairs: unique })
    }
}

/// One command's complete environment: the base, then `extra` (a later entry wins).
#[derive(Debug)]
pub(crate) struct SpawnEnv {
    base: Arc<BaseEnv>,
    extra: Vec<(OsString, OsString)>,
}

impl SpawnEnv {
    /// The base with `extra` added.
    pub(crate) fn new(base: Arc<BaseEnv>, extra: Vec<(OsString, OsString)>) -> SpawnEnv {
        SpawnEnv { base, extra }
    }

    /// Every variable once: the base's not replaced, then the additions (the last of each name).
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        let kept = self
            .base
            .pairs
            .iter()
            .filter(|(k, _)| !self.extra.iter().any(|(added, _)| added == k));
        let winning = self
            .extra
            .iter()
            .enumerate()
            .filter(|(i, (k, _))| !self.extra[i + 1..].iter().any(|(later, _)| later == k))
            .map(|(_, kv)| kv);
        kept.chain(winning)
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// An error naming the first addition with a NUL byte.
    pub(crate) fn check(&self) -> io::Result<()> {
        self.extra.iter().try_for_each(|(k, v)| check(k, v))
    }
}

/// An error when `k` or `v` holds a NUL byte.
fn check(k: &OsStr, v: &OsStr) -> io::Result<()> {
    if k.as_encoded_bytes().contains(&0) || v.as_encoded_bytes().contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("environment variable {k:?} contains a NUL byte"),
        ));
    }
    Ok(())
}
