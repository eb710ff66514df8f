use super::*;

type S = ShortStr;

#[test]
fn short_text_is_inline_and_long_text_is_not() {
    for text in ["", "a", "step-000001", "01234567890123456789012", "é€😀"] {
        let s = S::new(text);
        assert!(s.is_inline(), "{text:?}");
        assert_eq!(s.as_str(), text);
    }
    let long = "012345678901234567890123";
    let s = S::from(long.to_owned());
    assert!(!s.is_inline());
    assert_eq!(s.as_str(), long);
    assert_eq!(String::from(s), long);
    assert_eq!(std::mem::size_of::<S>(), 24);
}

#[test]
fn it_compares_hashes_and_prints_as_its_text() {
    use std::collections::hash_map::DefaultHasher;
    let hash = |h: &dyn Fn(&mut DefaultHasher)| {
        let mut state = DefaultHasher::new();
        h(&mut state);
        state.finish()
    };
    let (short, long) = (S::new("b"), S::new("a-rather-long-step-identifier"));
    assert!(long < short);
    assert_eq!(short.cmp(&long), std::cmp::Ordering::Greater);
    assert_eq!(short, "b");
    assert_eq!(hash(&|s| short.hash(s)), hash(&|s| "b".hash(s)));
    assert_eq!(hash(&|s| long.hash(s)), hash(&|s| long.as_str().hash(s)));
    assert_eq!(format!("{short:?} {long}"), "\"b\" a-rather-long-step-identifier");
}

#[test]
fn it_reads_and_writes_as_a_string() {
    for text in ["\"a\"", "\"a\\u00e9\\n\"", "\"a-rather-long-step-identifier-\\\"x\\\"\""] {
        let s: S = serde_json::from_str(text).expect("a string");
        let owned: String = serde_json::from_str(text).expect("a string");
        assert_eq!(s, owned);
        assert_eq!(
            serde_json::to_string(&s).expect("serialises"),
            serde_json::to_string(&owned).expect("serialises")
        );
    }
    for text in ["1", "null", "[]", "{}"] {
        let mine = serde_json::from_str::<S>(text).map_err(|e| e.to_string());
        let string = serde_json::from_str::<String>(text).map_err(|e| e.to_string());
        assert_eq!(mine.err(), string.err(), "same error for {text}");
    }
}
