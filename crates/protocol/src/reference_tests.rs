use super::*;

fn refs(text: &str) -> Vec<String> {
    Template::parse(text).references().map(|r| format!("{}:{}", r.step, r.path.join("."))).collect()
}

#[test]
fn both_syntaxes_parse_with_paths() {
    assert_eq!(refs("${a.result.x.0}"), ["a:x.0"]);
    assert_eq!(refs("{{ step-1.result }}"), ["step-1:"]);
    assert_eq!(refs("x ${a.result.b} y {{c.result.d}} z"), ["a:b", "c:d"]);
}

#[test]
fn ids_with_dots_are_split_at_result() {
    assert_eq!(refs("${fetch.v2.result.body}"), ["fetch.v2:body"]);
    assert_eq!(refs("${my.results.result.x}"), ["my.results:x"]);
}

#[test]
fn lookalikes_stay_literal() {
    assert!(refs("echo ${HOME} ${PATH:-x}").is_empty());
    assert!(refs("{{ name }} and ${a.resultx}").is_empty());
    assert!(refs("${a.result.}").is_empty());
    assert!(refs("${a b.result}").is_empty());
    assert!(refs("unterminated ${a.result.x").is_empty());
}

#[test]
fn dollar_before_mustache_is_literal_dollar() {
    let t = Template::parse("Balance: ${{s1.result.balance}}");
    assert_eq!(
        t.segments,
        vec![
            Segment::Literal("Balance: $".into()),
            Segment::Ref(Reference {
                step: StepId::new("s1"),
                path: vec!["balance".into()],
                syntax: Syntax::Mustache
            })
        ]
    );
}

#[test]
fn single_reference_is_detected() {
    assert!(Template::parse("${a.result.n}").as_single_ref().is_some());
    assert!(Template::parse(" ${a.result.n}").as_single_ref().is_none());
    assert!(!Template::parse("plain").has_refs());
}

#[test]
fn display_round_trips() {
    for s in ["${a.result.x.y}", "{{b.result}}"] {
        let t = Template::parse(s);
        assert_eq!(t.as_single_ref().unwrap().to_string(), s);
    }
}

#[test]
fn multibyte_text_is_safe() {
    assert_eq!(refs("é${a.result.ü}"), Vec::<String>::new());
    assert_eq!(refs("日本${a.result.x}語"), ["a:x"]);
}
