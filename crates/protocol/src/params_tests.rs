use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

fn params(value: &Value) -> Params {
    serde_json::from_value(value.clone()).unwrap()
}

fn params_text(text: &str) -> Params {
    serde_json::from_str(text).unwrap()
}

#[test]
fn reads_back_what_it_was_given_in_order() {
    let value = json!({
        "path": "out/a.txt",
        "n": 7, "neg": -3, "min": i64::MIN, "max": u64::MAX, "f": 1.5, "whole": 2.0,
        "t": true, "no": false, "null": null,
        "list": ["${a.result.x}", 1, [], {}, [null]],
        "nested": {"b": {"c": "ü ∑ 😀", "": "empty key"}, "a": []},
        "z": "last"
    });
    let p = params(&value);
    assert_eq!(Value::Object(p.to_map()), value);
    assert_eq!(serde_json::to_string(&p).unwrap(), serde_json::to_string(&value).unwrap());
    let keys: Vec<&str> = p.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        ["path", "n", "neg", "min", "max", "f", "whole", "t", "no", "null", "list", "nested", "z"]
    );
    assert_eq!(p.len(), 13);
    assert_eq!(p.get("path").and_then(ValueRef::as_str), Some("out/a.txt"));
    assert_eq!(p.get("z").and_then(ValueRef::as_str), Some("last"));
    assert_eq!(p.get("neg").and_then(ValueRef::as_f64), Some(-3.0));
    assert!(p.get("missing").is_none());
    let list = p.get("list").and_then(ValueRef::as_array).unwrap();
    assert_eq!(list.len(), 5);
    assert_eq!(list.get(1).and_then(ValueRef::as_f64), Some(1.0));
    assert!(list.get(5).is_none());
    let nested = p.get("nested").and_then(ValueRef::as_object).unwrap();
    assert_eq!(nested.get("b").unwrap(), json!({"c": "ü ∑ 😀", "": "empty key"}));
}

#[test]
fn numbers_serialise_as_a_value_would() {
    for text in [
        "0",
        "1",
        "-1",
        "18446744073709551615",
        "-9223372036854775808",
        "1.0",
        "-0.0",
        "1e300",
        "0.1",
    ] {
        let doc = format!("{{\"n\":{text}}}");
        let expected =
            serde_json::to_string(&serde_json::from_str::<Value>(&doc).unwrap()).unwrap();
        assert_eq!(serde_json::to_string(&params_text(&doc)).unwrap(), expected, "{text}");
    }
}

#[test]
fn a_repeated_key_keeps_its_first_place_and_last_value_as_a_map_does() {
    let text = r#"{"a": 1, "b": {"x": 1, "y": 2, "x": 3}, "a": 2, "c": 3}"#;
    let p = params_text(text);
    let map: Map<String, Value> = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_string(&p).unwrap(), serde_json::to_string(&map).unwrap());
    assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"a":2,"b":{"x":3,"y":2},"c":3}"#);
    assert_eq!(p.len(), 3);
}

#[test]
fn a_large_object_is_settled_through_a_map() {
    let mut text = String::from("{");
    for i in 0..40 {
        text.push_str(&format!("\"k{i}\": {i}, "));
    }
    text.push_str("\"k3\": \"again\"}");
    let map: Map<String, Value> = serde_json::from_str(&text).unwrap();
    let p = params_text(&text);
    assert_eq!(p.to_map(), map);
    assert_eq!(p.len(), 40);
    assert_eq!(p.get("k3").unwrap(), json!("again"));
}

#[test]
fn empty_is_the_empty_text_and_compares_equal() {
    let p = params_text("{}");
    assert!(p.is_empty());
    assert_eq!(p.heap_size(), 0);
    assert_eq!(p, Params::default());
    assert_eq!(serde_json::to_string(&p).unwrap(), "{}");
    assert_eq!(format!("{p:?}"), "{}");
}

#[test]
fn equality_ignores_key_order_as_a_map_does() {
    let a = params(&json!({"a": 1, "b": [1, 2]}));
    let b = params(&json!({"b": [1, 2], "a": 1}));
    assert_eq!(a, b);
    assert_ne!(a, params(&json!({"a": 1, "b": [2, 1]})));
    assert_ne!(a, params(&json!({"a": 1})));
}

#[test]
fn not_a_map_is_refused_with_the_words_a_map_would_use() {
    let ours = serde_json::from_str::<Params>("[1]").unwrap_err().to_string();
    let theirs = serde_json::from_str::<Map<String, Value>>("[1]").unwrap_err().to_string();
    assert_eq!(ours, theirs);
    assert!(serde_json::from_str::<Params>("{\"a\": }").is_err());
}

#[test]
fn yaml_values_read_as_json_would() {
    let yaml = "path: a.txt\ncount: 3\nneg: -2\nratio: 0.5\nitems: [x, 1, ~]\nflag: yes\n";
    let value: Value = serde_yaml_ng::from_str(yaml).unwrap();
    let from_yaml: Params = serde_yaml_ng::from_str(yaml).unwrap();
    assert_eq!(Value::Object(from_yaml.to_map()), value);
    assert_eq!(params(&value), from_yaml);
}

#[test]
fn strings_are_visited_in_document_order() {
    let p = params(&json!({"a": "1", "b": [2, "3", {"c": "4"}], "d": {"e": ["5"]}, "f": null}));
    let mut seen = Vec::new();
    for (_, v) in &p {
        v.for_each_str(&mut |s| seen.push(s));
    }
    assert_eq!(seen, ["1", "3", "4", "5"]);
}

#[test]
fn a_thread_reads_many_in_a_row_and_large_ones_do_not_stay() {
    let big = "x".repeat(2 << 20);
    let first = params(&json!({"content": big}));
    let second = params(&json!({"path": "a"}));
    assert_eq!(first.get("content").and_then(ValueRef::as_str).map(str::len), Some(2 << 20));
    assert_eq!(Value::Object(second.to_map()), json!({"path": "a"}));
    assert!(write::kept_capacity() <= KEEP);
}

#[test]
fn views_print_and_compare_as_values_do() {
    let value = json!({"a": [1, -2, 0.5, "x\ny", null, true], "b": {"c": {}}});
    let p = params(&value);
    let a = p.get("a").unwrap();
    assert_eq!(a.to_string(), value["a"].to_string());
    assert_eq!(p.get("b").unwrap().to_string(), r#"{"c":{}}"#);
    assert_eq!(a, value["a"]);
    assert!(a != value["b"], "a view equals only the value it holds");
    assert!(p.get("b").unwrap() != json!({"c": {"d": 1}}));
    assert_eq!(
        format!("{p:?}"),
        r#"{"a": [Number(1), Number(-2), Number(0.5), String("x\ny"), Null, Bool(true)], "b": {"c": {}}}"#
    );
}

#[test]
fn a_map_converts_into_the_same_params_as_its_text() {
    let map = json!({"path": "a.txt", "n": [1, 2]}).as_object().cloned().unwrap();
    let from: Params = map.clone().into();
    assert_eq!(from, params_text(r#"{"path": "a.txt", "n": [1, 2]}"#));
    assert_eq!(from.to_map(), map);
    assert!(!from.is_empty());
    assert!(from.heap_size() > 0);
}

#[test]
fn a_step_with_parameters_writes_them_and_one_without_does_not() {
    let with: crate::Step =
        serde_json::from_value(json!({"id": "a", "args": {"path": "x"}})).unwrap();
    let text = serde_json::to_string(&with).unwrap();
    assert!(text.contains(r#""parameters":{"path":"x"}"#), "{text}");
    let without: crate::Step = serde_json::from_value(json!({"id": "a"})).unwrap();
    assert!(!serde_json::to_string(&without).unwrap().contains("parameters"));
}

#[test]
fn the_schema_is_a_maps() {
    let ours = serde_json::to_value(schemars::schema_for!(Params)).unwrap();
    let theirs = serde_json::to_value(schemars::schema_for!(Map<String, Value>)).unwrap();
    assert_eq!(ours, theirs);
    // Inlined in the step's schema, beside the field's description, as a map's is.
    let step = serde_json::to_value(schemars::schema_for!(crate::Step)).unwrap();
    let mut inline = step["properties"]["parameters"].as_object().cloned().unwrap();
    assert!(inline.remove("description").is_some());
    assert_eq!(Value::Object(inline), json!({"type": "object", "additionalProperties": true}));
}

#[test]
fn smaller_than_the_map_it_replaces() {
    let value = json!({"query": "SELECT id FROM orders WHERE customer_id = $1", "params": ["${a.result.id}", 10], "limit": 100});
    let p = params(&value);
    let json_len = serde_json::to_string(&value).unwrap().len();
    assert!(p.heap_size() < json_len + 32, "{} bytes for {} of JSON", p.heap_size(), json_len);
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[a-z€😀/~\"\\\\]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-c]{0,2}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_object_round_trips_through_text_and_value(
        entries in prop::collection::vec(("[a-d]{0,3}", arb_json()), 0..8)
    ) {
        let built: Map<String, Value> = entries.into_iter().collect();
        let text = serde_json::to_string(&built).unwrap();
        // Compared with a map serde_json reads from the same text (its float parsing is not
        // exact for every float, so the text need not give back `built`).
        let map: Map<String, Value> = serde_json::from_str(&text).unwrap();
        let from_text: Params = serde_json::from_str(&text).unwrap();
        let from_map = Params::from_map(&map);
        let expected = serde_json::to_string(&map).unwrap();
        prop_assert_eq!(&from_text.to_map(), &map);
        prop_assert_eq!(&serde_json::to_string(&from_text).unwrap(), &expected);
        prop_assert_eq!(serde_json::to_string(&from_map).unwrap(), expected);
        prop_assert_eq!(from_text.len(), map.len());
        for (key, value) in &map {
            let got = from_text.get(key).map(ValueRef::to_value);
            prop_assert_eq!(got.as_ref(), Some(value));
        }
    }

    #[test]
    fn repeated_keys_settle_as_a_map_does(
        entries in prop::collection::vec(("[a-c]{1}", arb_json()), 0..10)
    ) {
        let mut text = String::from("{");
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 { text.push(','); }
            text.push_str(&serde_json::to_string(k).unwrap());
            text.push(':');
            text.push_str(&serde_json::to_string(v).unwrap());
        }
        text.push('}');
        let map: Map<String, Value> = serde_json::from_str(&text).unwrap();
        let p: Params = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(serde_json::to_string(&p).unwrap(), serde_json::to_string(&map).unwrap());
    }
}

#[test]
fn containers_know_their_size_and_emptiness() {
    let p = params(&json!({"list": [1, 2, 3], "none": [], "obj": {"a": 1, "b": 2}, "empty": {}}));
    let list = p.get("list").and_then(ValueRef::as_array).unwrap();
    assert!(!list.is_empty());
    assert_eq!(list.iter().len(), 3);
    assert_eq!(list.iter().size_hint(), (3, Some(3)));
    let none = p.get("none").and_then(ValueRef::as_array).unwrap();
    assert!(none.is_empty());
    assert_eq!(none.iter().len(), 0);
    let obj = p.get("obj").and_then(ValueRef::as_object).unwrap();
    assert!(!obj.is_empty());
    assert_eq!(obj.iter().len(), 2);
    assert_eq!(obj.iter().size_hint(), (2, Some(2)));
    assert!(p.get("empty").and_then(ValueRef::as_object).unwrap().is_empty());
    let mut entries = p.iter();
    entries.next();
    assert_eq!(entries.len(), 3);
}

/// A value that reaches the visitor as an option, as some deserializers hand one over.
struct Opt(Option<u64>);

impl<'de> serde::Deserializer<'de> for Opt {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        use serde::de::IntoDeserializer;
        match self.0 {
            Some(n) => v.visit_some(n.into_deserializer()),
            None => v.visit_none(),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de> serde::de::IntoDeserializer<'de> for Opt {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// What `Params` (as a map) and `Map` read from one deserializer.
type Both = (Result<Map<String, Value>, String>, Result<Map<String, Value>, String>);

/// `Params` and `Map` read from the same deserializer: the same object, or the same error.
fn both<'de, D>(make: impl Fn() -> D) -> Both
where
    D: serde::Deserializer<'de, Error = serde::de::value::Error>,
{
    use serde::Deserialize;
    let ours = Params::deserialize(make()).map(|p| p.to_map()).map_err(|e| e.to_string());
    let theirs = Map::<String, Value>::deserialize(make()).map_err(|e| e.to_string());
    (ours, theirs)
}

#[test]
fn other_deserializers_give_what_a_map_gets_from_them() {
    use serde::de::value::MapDeserializer;
    let (ours, theirs) =
        both(|| MapDeserializer::new(vec![("b", Opt(None)), ("a", Opt(Some(7)))].into_iter()));
    assert_eq!(ours, theirs);
    assert_eq!(ours.unwrap(), json!({"b": null, "a": 7}).as_object().cloned().unwrap());
    let wide = vec![("small", 5i128), ("negative", -5), ("huge", i128::MAX)];
    let (ours, theirs) = both(|| MapDeserializer::new(wide.clone().into_iter()));
    assert!(ours.is_err() && theirs.is_err(), "{ours:?} {theirs:?}");
    let fits = vec![("small", 5i128), ("negative", -5), ("top", i128::from(u64::MAX))];
    let (ours, theirs) = both(|| MapDeserializer::new(fits.clone().into_iter()));
    assert_eq!(ours, theirs);
    let want = json!({"small": 5, "negative": -5, "top": u64::MAX});
    assert_eq!(ours.unwrap(), want.as_object().cloned().unwrap());
    let (ours, theirs) = both(|| MapDeserializer::new(vec![("big", u128::MAX)].into_iter()));
    assert!(ours.is_err() && theirs.is_err(), "{ours:?} {theirs:?}");
    let (ours, theirs) = both(|| MapDeserializer::new(vec![("u", 9u128)].into_iter()));
    assert_eq!(ours, theirs);
    // What a wrong key or value is called, as a map calls it.
    let (ours, theirs) = both(|| MapDeserializer::new(vec![(1u64, 2u64)].into_iter()));
    assert_eq!(ours, theirs);
    assert!(ours.is_err());
    let bytes: &[u8] = b"x";
    let (ours, theirs) = both(|| {
        MapDeserializer::new(
            vec![("b", serde::de::value::BytesDeserializer::new(bytes))].into_iter(),
        )
    });
    assert_eq!(ours, theirs);
    assert!(ours.is_err());
}
