//! Ordering the reap of a tree's leader against signals sent to its process group by number, on every platform:
//! until the leader is reaped its pid — the group's id — cannot be handed to another process, so a signal sent while
//! it is unreaped reaches the tree and nothing else.

use std::sync::RwLock;

/// Whether a tree's leader has been reaped, and the lock that keeps a reap from happening mid-signal.
#[derive(Debug, Default)]
pub(crate) struct LeaderReap {
    reaped: RwLock<bool>,
}

impl LeaderReap {
    /// Reaps the leader with `reap` (which must wait for it) while no group signal is in flight, and records it.
    pub(crate) fn reap<R>(&self, reap: impl FnOnce() -> R) -> R {
        let mut reaped = self.reaped.write().unwrap_or_else(|p| p.into_inner());
        let r = reap();
        *reaped = true;
        r
    }

    /// Runs `f` if the leader is not reaped yet, holding off its reaping meanwhile; returns whether it ran.
    #[cfg_attr(windows, allow(dead_code))]
    pub(crate) fn while_unreaped(&self, f: impl FnOnce()) -> bool {
        let reaped = self.reaped.read().unwrap_or_else(|p| p.into_inner());
        if *reaped {
            return false;
        }
        f();
        true
    }

    /// Whether the leader's status has been taken.
    pub(crate) fn is_reaped(&self) -> bool {
        *self.reaped.read().unwrap_or_else(|p| p.into_inner())
    }
}
