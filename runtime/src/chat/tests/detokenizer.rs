//! Streaming detokenization on the handwritten byte-level and byte-fallback tokenizers.

use super::{byte_fallback_json, byte_level_json, load, TempDir, LLAMA_CONFIG};
use crate::chat::{Detokenizer, Tokenizer};

/// Pushes every id and returns what each push gave.
fn stream(detok: &mut Detokenizer<'_>, ids: &[u32]) -> Vec<Option<String>> {
    ids.iter().map(|&id| detok.push(id).unwrap()).collect()
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

/// Streams `ids` and checks the pieces add up to decoding the whole sequence.
fn assert_streams_like_full_decode(tok: &Tokenizer, ids: &[u32], skip: bool) {
    let mut detok = tok.detokenizer(skip);
    let mut text: String = stream(&mut detok, ids).into_iter().flatten().collect();
    text.push_str(&detok.finish().unwrap());
    assert_eq!(text, tok.decode(ids, skip).unwrap());
}

#[test]
fn byte_level_holds_back_a_split_emoji() {
    let dir = TempDir::new("detok-bl");
    let tok = load(&dir, &byte_level_json(), None);
    // " 🦙" is Ġ then the four bytes F0 9F A6 99, one token each.
    let ids = tok.encode("he 🦙!", false).unwrap();
    assert_eq!(ids, vec![256, b' ' as u32, 0xF0, 0x9F, 0xA6, 0x99, 0x21]);
    let mut detok = tok.detokenizer(false);
    assert_eq!(
        stream(&mut detok, &ids),
        vec![
            some("he"),
            some(" "),
            None,
            None,
            None,
            some("🦙"),
            some("!")
        ]
    );
    assert_eq!(detok.finish().unwrap(), "");
}

#[test]
fn byte_fallback_drops_the_first_space_and_joins_bytes() {
    let dir = TempDir::new("detok-bf");
    let tok = load(&dir, &byte_fallback_json(), Some(LLAMA_CONFIG));
    // "a é" → ▁ a ▁ <0xC3> <0xA9>; the decoder strips the first token's space.
    let ids = tok.encode("a é", false).unwrap();
    assert_eq!(ids, vec![259, 260, 259, 3 + 0xC3, 3 + 0xA9]);
    let mut detok = tok.detokenizer(false);
    assert_eq!(
        stream(&mut detok, &ids),
        vec![None, some("a"), some(" "), None, some("é")]
    );
}

#[test]
fn context_keeps_the_space_of_the_first_generated_token() {
    let dir = TempDir::new("detok-context");
    let tok = load(&dir, &byte_fallback_json(), Some(LLAMA_CONFIG));
    let prompt = tok.encode("a", true).unwrap();
    let mut detok = Detokenizer::with_context(&tok, &prompt, true);
    assert_eq!(detok.push(262).unwrap(), some(" h"));
    let mut fresh = tok.detokenizer(true);
    assert_eq!(fresh.push(262).unwrap(), some("h"));
}

#[test]
fn finish_flushes_an_incomplete_character() {
    let dir = TempDir::new("detok-finish");
    let tok = load(&dir, &byte_fallback_json(), Some(LLAMA_CONFIG));
    let mut detok = tok.detokenizer(false);
    assert_eq!(detok.push(260).unwrap(), some("a"));
    assert_eq!(detok.push(3 + 0xC3).unwrap(), None);
    assert_eq!(detok.finish().unwrap(), "\u{FFFD}");
    assert_eq!(detok.finish().unwrap(), "");
}

#[test]
fn special_tokens_are_skipped_or_shown() {
    let dir = TempDir::new("detok-special");
    let tok = load(&dir, &byte_level_json(), None);
    let mut skipping = tok.detokenizer(true);
    assert_eq!(stream(&mut skipping, &[256, 258]), vec![some("he"), None]);
    let mut showing = tok.detokenizer(false);
    assert_eq!(
        stream(&mut showing, &[256, 258]),
        vec![some("he"), some("<|end|>")]
    );
}

#[test]
fn pieces_add_up_to_the_full_decode() {
    let texts = ["héllo wörld 🦙🦙 日本語", " he w  \n\t🇺🇸", "", "a\u{0301}"];
    for (name, json) in [("bl", byte_level_json()), ("bf", byte_fallback_json())] {
        let dir = TempDir::new(&format!("detok-sum-{name}"));
        let tok = load(&dir, &json, None);
        for text in texts {
            let ids = tok.encode(text, true).unwrap();
            assert_streams_like_full_decode(&tok, &ids, false);
            assert_streams_like_full_decode(&tok, &ids, true);
        }
    }
}
