//! Unit tests of the Coder surface's answers: output heads and tails, truncation, long lines, who sees what.

use super::*;

fn chunk(text: &str, start: u64, total: u64) -> shellward::OutputChunk {
    let mut chunk = shellward::OutputChunk::default();
    chunk.text = text.into();
    chunk.next_cursor = start + text.len() as u64;
    chunk.total_bytes = total;
    chunk
}

#[test]
fn short_output_is_whole_and_not_truncated() {
    let (text, t) = head_tail(&chunk("hello\n", 0, 6), None);
    assert_eq!(text, "hello\n");
    assert!(t.is_none());
}

#[test]
fn long_output_keeps_head_and_tail_around_coders_marker() {
    let head = "h".repeat(100) + "\n";
    let tail = "t".repeat(50);
    let total = 1000;
    let (text, t) = head_tail(
        &chunk(&head, 0, total),
        Some(&chunk(&tail, total - 50, total)),
    );
    let gap = total - 50 - head.len() as u64;
    assert_eq!(
        text,
        format!("{head}\n\n... [omitted {gap} bytes] ...\n\n{tail}")
    );
    let t = t.unwrap();
    assert_eq!(t["original_bytes"], total);
    assert_eq!(t["omitted_bytes"], gap);
    assert_eq!(t["retained_bytes"], text.len());
    assert_eq!(t["strategy"], "head_tail");
}

#[test]
fn adjacent_head_and_tail_are_joined_without_a_marker() {
    let (text, t) = head_tail(&chunk("abc", 0, 6), Some(&chunk("def", 3, 6)));
    assert_eq!(text, "abcdef");
    assert!(t.is_none());
}

#[test]
fn long_lines_are_shortened_at_a_character_boundary_and_counted() {
    let line = "é".repeat(3000); // 6000 bytes
    let (text, t) = head_tail(&chunk(&format!("{line}\nok\n"), 0, 6004), None);
    let first = text.lines().next().unwrap();
    assert!(first.ends_with(LINE_SUFFIX), "{first}");
    assert!(first.len() <= MAX_LINE, "{}", first.len());
    assert!(text.ends_with("\nok\n"));
    let t = t.unwrap();
    assert_eq!(t["original_bytes"], 6004);
    assert_eq!(
        t["omitted_bytes"].as_u64().unwrap() as usize,
        6000 - (first.len() - LINE_SUFFIX.len())
    );
}

#[test]
fn chat_ids_are_uuids_in_any_form_coder_accepts() {
    let mut h = HeaderMap::new();
    for (raw, want) in [
        (
            "6F9619FF-8B86-D011-B42D-00CF4FC964FF",
            Some("6f9619ff-8b86-d011-b42d-00cf4fc964ff"),
        ),
        (
            "{6f9619ff-8b86-d011-b42d-00cf4fc964ff}",
            Some("6f9619ff-8b86-d011-b42d-00cf4fc964ff"),
        ),
        (
            "urn:uuid:6f9619ff-8b86-d011-b42d-00cf4fc964ff",
            Some("6f9619ff-8b86-d011-b42d-00cf4fc964ff"),
        ),
        (
            "6f9619ff8b86d011b42d00cf4fc964ff",
            Some("6f9619ff-8b86-d011-b42d-00cf4fc964ff"),
        ),
        ("not-a-uuid", None),
        ("", None),
    ] {
        h.insert(CHAT_HEADER, raw.parse().unwrap());
        assert_eq!(chat_id(&h).as_deref(), want, "{raw}");
    }
}

#[test]
fn a_chat_sees_its_own_and_chatless_processes_only() {
    let mine = vec![(CHAT_LABEL.to_string(), "a".to_string())];
    assert!(visible(Some("a"), &mine));
    assert!(!visible(Some("b"), &mine));
    assert!(visible(None, &mine));
    assert!(visible(Some("b"), &[]));
}
