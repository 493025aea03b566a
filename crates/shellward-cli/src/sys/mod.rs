//! The CLI's platform-specific parts: the signals (or console events) that stop or reload it, a closed stdout, the local terminal's
//! echo, and serving on a unix socket. Unix in `unix.rs`, Windows in `windows.rs`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{
    EchoOff, Interrupts, StopSignals, bind_unix, closed_stdout_ends_quietly, create_config_dirs,
    effective_uid, owner_only, reload_on_hangup, terminate_signal,
};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{
    EchoOff, Interrupts, StopSignals, bind_unix, closed_stdout_ends_quietly, create_config_dirs,
    owner_only, reload_on_hangup, terminate_signal,
};
