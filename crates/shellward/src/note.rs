//! What a result says to the model beside its data: a [`Note`] is its text (what the model reads, as the surfaces
//! send it: a plain string) and its [`NoteKind`] (what it is about, for a host that acts on it without reading the
//! English: a refused write, a background start, a timeout).

use std::borrow::Cow;

/// What a note is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NoteKind {
    /// Said by a policy (its notes to the agent, or a deny's follow-up).
    Policy,
    /// The command was not run: a policy denied it, or a person declined it.
    NotRun,
    /// The command runs on in the background: its id and how to follow it up.
    Background,
    /// The foreground timeout expired: what was done with the command.
    Timeout,
    /// Processes of the command's tree outlived it, or were stopped.
    Leftover,
    /// About the output: left out of the result, where the log is, what to search.
    Output,
    /// About its input: a prompt waits for an answer, stdin is closed.
    Input,
    /// The sandbox refused the command something (a write, a network destination, a socket, a system call, a
    /// process limit): what, by which rule, and what to ask for.
    Refused(Refusal),
    /// About where the command ran: the working directory of the session, a directory it could not write.
    Workdir,
    /// About a person's approval: asked, answered, remembered.
    Approval,
    /// About a preview or an undo of the command's changes.
    Changes,
    /// Anything else.
    Other,
}

/// What the sandbox refused a command ([`NoteKind::Refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// A write outside the writable paths (`[confinement] writable`).
    Write,
    /// A network destination (`[confinement] network`).
    Network,
    /// A host Unix socket, or a datagram Unix socket, under a network other than the host's.
    UnixSocket,
    /// A system call (`[confinement] deny_syscalls`).
    Syscall,
    /// A fork past the tree's process limit.
    ProcessLimit,
}

impl NoteKind {
    /// The kind as a short name (`refused_write`, `background`): what records and metrics use.
    pub fn name(self) -> &'static str {
        match self {
            NoteKind::Policy => "policy",
            NoteKind::NotRun => "not_run",
            NoteKind::Background => "background",
            NoteKind::Timeout => "timeout",
            NoteKind::Leftover => "leftover",
            NoteKind::Output => "output",
            NoteKind::Input => "input",
            NoteKind::Refused(Refusal::Write) => "refused_write",
            NoteKind::Refused(Refusal::Network) => "refused_network",
            NoteKind::Refused(Refusal::UnixSocket) => "refused_unix_socket",
            NoteKind::Refused(Refusal::Syscall) => "refused_syscall",
            NoteKind::Refused(Refusal::ProcessLimit) => "refused_process_limit",
            NoteKind::Workdir => "workdir",
            NoteKind::Approval => "approval",
            NoteKind::Changes => "changes",
            NoteKind::Other => "other",
        }
    }
}

/// One note of a result: its text, which the model reads (every surface sends it as a plain string), and its kind.
///
/// It reads as its text: `note.contains("…")`, `format!("{note}")` and `note == "…"` see the text only, and two notes
/// are equal when their texts are.
#[derive(Debug, Clone)]
pub struct Note {
    kind: NoteKind,
    text: String,
}

impl Note {
    /// A note of `kind` saying `text`.
    pub fn new(kind: NoteKind, text: impl Into<String>) -> Note {
        Note {
            kind,
            text: text.into(),
        }
    }

    /// What the note is about.
    pub fn kind(&self) -> NoteKind {
        self.kind
    }

    /// Its text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its text, owned.
    pub fn into_text(self) -> String {
        self.text
    }
}

impl std::ops::Deref for Note {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for Note {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl std::borrow::Borrow<str> for Note {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Note {
    fn eq(&self, other: &Note) -> bool {
        self.text == other.text
    }
}

impl Eq for Note {}

impl std::hash::Hash for Note {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state)
    }
}

impl PartialEq<str> for Note {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Note {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for Note {
    fn eq(&self, other: &String) -> bool {
        &self.text == other
    }
}

/// A note read back from its text alone (a result's JSON): its kind is not known.
impl From<String> for Note {
    fn from(text: String) -> Note {
        Note::new(NoteKind::Other, text)
    }
}

impl From<Note> for String {
    fn from(note: Note) -> String {
        note.text
    }
}

impl serde::Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Note {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Note, D::Error> {
        String::deserialize(d).map(Note::from)
    }
}

impl schemars::JsonSchema for Note {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "String".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_as_its_text_and_keeps_its_kind() {
        let n = Note::new(
            NoteKind::Refused(Refusal::Write),
            "Refused by the sandbox: writing /etc/x",
        );
        assert!(n.contains("/etc/x"));
        assert_eq!(n, "Refused by the sandbox: writing /etc/x");
        assert_eq!(n.kind().name(), "refused_write");
        assert_eq!(
            serde_json::to_string(std::slice::from_ref(&n)).unwrap(),
            "[\"Refused by the sandbox: writing /etc/x\"]"
        );
        let back: Vec<Note> = serde_json::from_str("[\"x\"]").unwrap();
        assert_eq!(back[0].kind(), NoteKind::Other);
        assert_eq!([n.clone(), n.clone()].join("; "), format!("{n}; {n}"));
    }
}
