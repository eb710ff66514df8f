use super::*;

fn refs(text: &str) -> Vec<String> {
    Template::parse(text).references().map(|r| format!("{}:{}", r.step, r.path.as_str())).collect()
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
                path: RefPath::from(vec!["balance".to_owned()]),
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

#[test]
fn a_path_is_its_segments() {
    let t = Template::parse("${a.result.rows.0.offset} {{b.result}}");
    let paths: Vec<&RefPath> = t.references().map(|r| &r.path).collect();
    assert_eq!(paths[0].iter().collect::<Vec<_>>(), ["rows", "0", "offset"]);
    assert_eq!((paths[0].len(), paths[0].is_empty()), (3, false));
    assert_eq!(paths[1].iter().count(), 0);
    assert_eq!((paths[1].len(), paths[1].is_empty()), (0, true));
    assert_eq!(serde_json::to_string(paths[0]).unwrap(), r#"["rows","0","offset"]"#);
    assert_eq!(serde_json::to_string(paths[1]).unwrap(), "[]");
    let back: RefPath = serde_json::from_str(r#"["rows","0","offset"]"#).unwrap();
    assert_eq!(&back, paths[0]);
    assert_eq!(format!("{:?}", paths[0]), r#"["rows", "0", "offset"]"#);
}
