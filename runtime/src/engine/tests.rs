use super::step::common_prefix;
use super::*;
use std::time::Duration;

fn stops(list: &[&str]) -> StopMatcher {
    StopMatcher::new(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn stop_strings_hold_back_possible_starts_and_cut_at_the_match() {
    let mut m = stops(&["</end>", "User:"]);
    assert_eq!(m.push("Hello <"), "Hello ");
    assert_eq!(m.push("b>"), "<b>");
    assert_eq!(m.push(" x </e"), " x ");
    assert!(!m.stopped());
    assert_eq!(m.push("nd> more"), "");
    assert!(m.stopped());
    assert_eq!(m.push("after"), "");
    assert_eq!(m.finish(), "");
}

#[test]
fn without_a_stop_string_everything_is_released() {
    let mut m = stops(&["ab"]);
    assert_eq!(m.push("xa"), "x");
    assert_eq!(m.finish(), "a");
    let mut none = stops(&[""]);
    assert_eq!(none.push("é a"), "é a");
}

#[test]
fn stop_matching_respects_char_boundaries() {
    let mut m = stops(&["éé"]);
    assert_eq!(m.push("aé"), "a");
    assert_eq!(m.push("é!"), "");
    assert!(m.stopped());
}

#[test]
fn common_prefix_counts_equal_leading_ids() {
    assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4, 5]), 2);
    assert_eq!(common_prefix(&[], &[1]), 0);
    assert_eq!(common_prefix(&[1, 2], &[1, 2, 3]), 2);
}

#[test]
fn stats_give_rates_and_zero_without_time() {
    let stats = GenerationStats {
        prefill_tokens: 50,
        prefill_time: Duration::from_millis(250),
        decode_tokens: 10,
        decode_time: Duration::from_millis(500),
        time_to_first_token: Duration::from_millis(260),
    };
    assert!((stats.prefill_tokens_per_s() - 200.0).abs() < 1e-9);
    assert!((stats.decode_tokens_per_s() - 20.0).abs() < 1e-9);
    assert_eq!(GenerationStats::default().decode_tokens_per_s(), 0.0);
    assert!(stats.to_string().contains("200.0 tok/s"), "{stats}");
}

#[test]
fn context_overflow_names_the_window_and_lengths() {
    let err = EngineError::ContextOverflow {
        window: 8,
        cached: 3,
        adding: 42,
    };
    let message = err.to_string();
    for part in ["8 tokens", "3 tokens", "42 more", "total 45"] {
        assert!(message.contains(part), "{message}");
    }
}

#[test]
fn a_context_overflow_of_any_size_renders_without_overflowing() {
    let err = EngineError::ContextOverflow {
        window: 8,
        cached: 3,
        adding: usize::MAX,
    };
    let message = err.to_string();
    let max = usize::MAX;
    assert!(message.contains(&format!("{max} more")), "{message}");
    assert!(
        message.contains(&format!("total more than {max}")),
        "{message}"
    );
}
