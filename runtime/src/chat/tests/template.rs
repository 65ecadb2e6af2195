//! Chat templates rendered as transformers renders them with Jinja2 (expected strings
//! produced by Jinja2 3.1 with `trim_blocks`, `lstrip_blocks` and `loopcontrols`).

use crate::chat::{ChatError, ChatTemplate, Message, SpecialTokens, TEMPLATE_OUTPUT_LIMIT};

/// Block tags on their own indented lines, `set` inside `if`, slicing, `loop` variables,
/// `~`, and Python string methods.
const TEMPLATE: &str = r#"{% if messages[0]['role'] == 'system' %}
    {% set system = messages[0]['content'].strip() %}
    {% set rest = messages[1:] %}
{% else %}
    {% set system = 'Be brief.' %}
    {% set rest = messages %}
{% endif %}
{{ bos_token }}[{{ system.upper() }}]
{% for message in rest %}
    {% if message['role'].startswith('sys') %}
        {{ raise_exception('system message at position ' ~ loop.index0) }}
    {% endif %}
    <{{ message['role'].title() }} {{ loop.index }}/{{ loop.length }}>{{ message['content'].strip() }}{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}

{% endfor %}
{% if add_generation_prompt %}
<Assistant>
{% endif %}
"#;

fn tokens(bos: Option<&str>) -> SpecialTokens {
    SpecialTokens {
        bos_token: bos.map(str::to_string),
        eos_token: Some("</s>".into()),
        ..SpecialTokens::default()
    }
}

fn conversation() -> Vec<Message> {
    vec![
        Message::new("system", "  You are terse. "),
        Message::new("user", " hi there\n"),
        Message::new("assistant", "hello"),
        Message::new("user", "bye"),
    ]
}

#[test]
fn renders_like_jinja2_with_transformers_settings() {
    // A `.json` name must not switch on JSON escaping.
    let template =
        ChatTemplate::new("tokenizer_config.json", TEMPLATE, tokens(Some("<s>"))).unwrap();
    assert_eq!(
        template.render(&conversation(), true).unwrap(),
        "<s>[YOU ARE TERSE.]\n    <User 1/3>hi there\n    <Assistant 2/3>hello</s>\n    <User 3/3>bye\n<Assistant>\n"
    );
}

#[test]
fn unset_special_tokens_render_empty() {
    let template = ChatTemplate::new("t", TEMPLATE, tokens(None)).unwrap();
    assert_eq!(
        template.render(&conversation()[1..2], false).unwrap(),
        "[BE BRIEF.]\n    <User 1/1>hi there\n"
    );
}

#[test]
fn raise_exception_becomes_a_typed_error() {
    let template = ChatTemplate::new("t", TEMPLATE, tokens(None)).unwrap();
    let messages = [Message::new("user", "a"), Message::new("system", "b")];
    let err = template.render(&messages, false).unwrap_err();
    let ChatError::TemplateRaised { name, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (name.as_str(), message.as_str()),
        ("t", "system message at position 1")
    );
    assert_eq!(
        err.to_string(),
        "chat template `t` rejected the conversation: system message at position 1"
    );
}

#[test]
fn syntax_error_names_the_template() {
    let err = ChatTemplate::new("cfg.json", "{% for m in messages %}", tokens(None)).unwrap_err();
    assert!(matches!(&err, ChatError::TemplateSyntax { name, .. } if name == "cfg.json"));
    assert!(err.to_string().contains("cfg.json"), "{err}");
}

#[test]
fn render_failure_is_not_an_exception() {
    let template = ChatTemplate::new(
        "t",
        "{{ messages[0].content.nosuchmethod() }}",
        tokens(None),
    )
    .unwrap();
    let err = template
        .render(&[Message::new("user", "x")], false)
        .unwrap_err();
    assert!(
        matches!(&err, ChatError::TemplateRender { name, .. } if name == "t"),
        "{err:?}"
    );
}

#[test]
fn loop_controls_and_namespace_work() {
    let source = "{% set ns = namespace(n=0) %}{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% if ns.n == 2 %}{% break %}{% endif %}{% endfor %}|{{ ns.n }}";
    let template = ChatTemplate::new("t", source, tokens(None)).unwrap();
    assert_eq!(
        template.render(&conversation(), false).unwrap(),
        " hi there\nhello|2"
    );
}

#[test]
fn tools_and_documents_are_none_and_print_like_python() {
    let source = "{{ tools is none }} {{ documents is none }} {{ tools is defined }}";
    let template = ChatTemplate::new("t", source, tokens(None)).unwrap();
    assert_eq!(template.render(&[], false).unwrap(), "True True True");
}

#[test]
fn a_template_that_runs_for_ever_is_a_render_error_not_a_hang() {
    let endless =
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
    let template = ChatTemplate::new("t", endless, tokens(None)).unwrap();
    let err = template.render(&[], false).unwrap_err();
    assert!(matches!(err, ChatError::TemplateRender { .. }), "{err}");
    assert!(err.to_string().contains("fuel"), "{err}");
}

#[test]
fn a_template_that_builds_a_huge_string_it_never_prints_is_a_render_error() {
    // Forty doublings would build a terabyte in a few hundred instructions; the fuel
    // pays for the bytes a template creates, so it runs out first.
    let doubling = "{% set s = namespace(v='x') %}{% for i in range(40) %}\
                    {% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v | length }}";
    let template = ChatTemplate::new("t", doubling, tokens(None)).unwrap();
    let err = template.render(&[], false).unwrap_err();
    assert!(matches!(err, ChatError::TemplateRender { .. }), "{err}");
    assert!(err.to_string().contains("fuel"), "{err}");
    let repeated = "{% set s = 'x' * 100000000 %}{{ s | length }}";
    let template = ChatTemplate::new("t", repeated, tokens(None)).unwrap();
    let err = template.render(&[], false).unwrap_err();
    assert!(err.to_string().contains("fuel"), "{err}");
}

#[test]
fn a_template_whose_output_runs_away_is_an_error_not_an_allocation() {
    let source = "{% for i in range(60000) %}{{ messages[0].content }}{% endfor %}";
    let template = ChatTemplate::new("t", source, tokens(None)).unwrap();
    let long = [Message::new("user", "x".repeat(1000))];
    let err = template.render(&long, false).unwrap_err();
    assert!(
        matches!(err, ChatError::TemplateTooLong { limit, .. } if limit == TEMPLATE_OUTPUT_LIMIT),
        "{err}"
    );
    assert!(err.to_string().contains("rendered more than"), "{err}");
}
