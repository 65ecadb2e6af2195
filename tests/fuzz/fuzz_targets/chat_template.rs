//! The chat template renderer: any template text renders a fixed conversation or is a
//! typed error, never a panic or a hang (the renderer's fuel bounds the work).

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::chat::SpecialTokens;
use oxrelax_runtime::{ChatTemplate, Message};

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let tokens = SpecialTokens {
        bos_token: Some("<s>".into()),
        eos_token: Some("</s>".into()),
        unk_token: None,
        pad_token: None,
    };
    let Ok(template) = ChatTemplate::new("fuzz.jinja", source, tokens) else {
        return;
    };
    let messages = [
        Message::new("system", "Be brief."),
        Message::new("user", "Hello?"),
        Message::new("assistant", "Hi."),
        Message::new("user", "Count to 3."),
    ];
    for add_generation_prompt in [false, true] {
        let _ = template.render(&messages, add_generation_prompt);
    }
});
