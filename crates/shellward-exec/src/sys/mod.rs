//! Platform-specific process control. Unix (Linux) today; each platform lives in its own module so Windows (job
//! objects) can follow behind the same crate-internal interface: `Platform`, `Tree`, `Leader`, `SpawnSpec`, and the
//! `pidfd`/`pipes` helpers.

#[cfg(unix)]
pub(crate) mod unix;
#[cfg(unix)]
pub(crate) use unix::{
    BaseEnv, ContainmentKind, Leader, Platform, SpawnEnv, SpawnSpec, Tree, pidfd, pipes,
};
