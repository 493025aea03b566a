//! What Linux has and the other platforms (macOS, FreeBSD, Windows) do not: each answers "none here".

/// There is no cgroup `pids` hierarchy here.
pub(crate) fn own_pids_dir() -> Option<std::path::PathBuf> {
    None
}

/// No sandbox covers the log root here: no skeleton of it is kept.
pub(crate) fn log_skeleton(
    _own: &std::path::Path,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    None
}

/// Whether commands without the host's network can have Unix sockets of their own (see
/// `Executor::unix_socket_broker`): never here.
pub(crate) fn unix_socket_broker() -> bool {
    false
}

/// No Landlock here: 0.
pub(crate) fn landlock_abi() -> i32 {
    0
}
