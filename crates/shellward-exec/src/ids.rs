//! The names a host uses for what the executor keeps: a process's id and the session it belongs to. Each is a type of
//! its own, so a call cannot swap them; every per-process operation of [`Executor`](crate::Executor) takes them in
//! the same order, `(session, id, …)`.

use std::borrow::Borrow;
use std::fmt;

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            #[doc = concat!("A `", stringify!($name), "` holding `value` as it is.")]
            pub fn new(value: impl Into<String>) -> $name {
                $name(value.into())
            }

            /// The text, as the tools and records show it.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The text, by value.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> $name {
                $name(value.to_string())
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> $name {
                $name(value)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

name_type!(
    /// A process's id as [`Executor::execute`](crate::Executor::execute) hands it out (`p1-k3x9q2mz`, …: a number and
    /// the executor's random instance tag, so an id is never reused by a later run or another server).
    ProcessId
);

name_type!(
    /// The session (caller: one agent, one conversation) a process belongs to. Only calls naming the same session
    /// see, read, write or signal the process; `None` where a call takes an `Option<&Session>` is a session of its
    /// own, the one of callers that name none.
    Session
);

/// `session` as the plain text the registry keys by.
pub(crate) fn session_str(session: Option<&Session>) -> Option<&str> {
    session.map(Session::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_show_as_their_text_and_compare_with_it() {
        let id = ProcessId::from("p1-abc");
        assert_eq!(id, "p1-abc");
        assert_eq!(id.to_string(), "p1-abc");
        assert_ne!(id, "p1");
        let back = Session::new(String::from("s-1"));
        assert_eq!(back.as_str(), "s-1");
        assert_eq!(session_str(Some(&back)), Some("s-1"));
        assert_eq!(session_str(None), None);
    }
}
