//! Tests of structured output: extracting JSON from answers of every shape, and the
//! ask-validate-ask-again loop against a scripted model.

use serde_json::json;

use super::*;
use crate::script::{FailureKind, ScriptTurn, ScriptedClient};

// ---- extract_json ----

#[test]
fn bare_json_is_taken_whole() {
    assert_eq!(extract_json("  {\"a\": 1}\n"), Ok(json!({"a": 1})));
    assert_eq!(extract_json("[1, 2]"), Ok(json!([1, 2])));
    assert_eq!(extract_json("\"text\""), Ok(json!("text")));
}

#[test]
fn a_json_fence_is_found() {
    let text = "Here is the plan:\n```json\n{\"steps\": [1, 2]}\n```\nDone.";
    assert_eq!(extract_json(text), Ok(json!({"steps": [1, 2]})));
    let upper = "```JSON\n[true]\n```";
    assert_eq!(extract_json(upper), Ok(json!([true])));
}

#[test]
fn an_unlabelled_fence_is_found_and_other_languages_are_skipped() {
    let text = "```python\nx = {'a': 1}\n```\nand\n```\n{\"b\": 2}\n```";
    assert_eq!(extract_json(text), Ok(json!({"b": 2})));
}

#[test]
fn an_unclosed_fence_holds_the_rest() {
    assert_eq!(extract_json("```json\n{\"a\": [1]}\n"), Ok(json!({"a": [1]})));
}

#[test]
fn a_broken_fence_falls_back_to_a_later_one_or_prose() {
    let text = "```json\n{\"a\": }\n```\nfixed:\n```json\n{\"a\": 2}\n```";
    assert_eq!(extract_json(text), Ok(json!({"a": 2})));
    // The broken fence alone: its error is reported.
    let err = extract_json("```json\n{\"a\": }\n```").unwrap_err();
    assert!(err.starts_with("No JSON object or array was found in the answer."), "{err}");
    assert!(err.contains("A ```json block is not valid JSON: expected value at line 1"), "{err}");
}

#[test]
fn json_inside_prose_is_found() {
    let text = "Sure! Here it is: {\"a\": {\"b\": [1, {\"c\": 2}]}} Let me know if you need more.";
    assert_eq!(extract_json(text), Ok(json!({"a": {"b": [1, {"c": 2}]}})));
}

#[test]
fn brackets_inside_strings_do_not_end_the_object() {
    let text = r#"Result: {"msg": "a } and ] and { inside", "q": "say \"}\" \\"} trailing }"#;
    assert_eq!(
        extract_json(text),
        Ok(json!({"msg": "a } and ] and { inside", "q": "say \"}\" \\"}))
    );
}

#[test]
fn a_broken_first_object_gives_way_to_a_nested_or_later_one() {
    // The outer braces balance but are not JSON; the inner object is.
    assert_eq!(extract_json("{not json {\"a\": 1}}"), Ok(json!({"a": 1})));
    // An unclosed brace in prose, then the answer.
    assert_eq!(extract_json("Use { carefully: {\"a\": 1}"), Ok(json!({"a": 1})));
    // Mismatched brackets, then the answer.
    assert_eq!(extract_json("(see [x} here) [\"ok\"]"), Ok(json!(["ok"])));
}

#[test]
fn of_several_objects_the_first_that_parses_wins() {
    assert_eq!(extract_json("{\"a\": 1} and then {\"b\": 2}"), Ok(json!({"a": 1})));
    assert_eq!(extract_json("{a: 1} and then {\"b\": 2}"), Ok(json!({"b": 2})));
}

#[test]
fn multibyte_text_around_json_is_fine() {
    assert_eq!(extract_json("Voilà « {\"é\": \"ü\"} » fin"), Ok(json!({"é": "ü"})));
}

#[test]
fn garbage_and_empty_text_are_errors() {
    assert_eq!(
        extract_json("I cannot help with that."),
        Err("No JSON object or array was found in the answer.".to_owned())
    );
    assert_eq!(extract_json("  \n"), Err("The answer is empty; it should be JSON.".to_owned()));
    assert!(extract_json("{{{{ ]]]] }").is_err());
}

#[test]
fn pathological_brackets_end_quickly() {
    let text = "[".repeat(200_000);
    let started = std::time::Instant::now();
    assert!(extract_json(&text).is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    let mut budget = 10;
    assert_eq!(balanced_end(b"[[[[[[[[[[[[[[]]]]]]]]]]]]]]", 0, &mut budget), None);
    assert_eq!(budget, 0);
}

// ---- request_json ----

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["steps"],
        "properties": {
            "steps": {"type": "array", "items": {"type": "integer"}, "minItems": 1}
        },
        "additionalProperties": false
    })
}

fn base_request() -> ChatRequest {
    let mut request = ChatRequest::new("m", vec![Message::user("make a plan")]);
    request.system = Some("You are the planner.".into());
    request
}

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage { input_tokens: input, output_tokens: output, ..TokenUsage::default() }
}

fn ask(client: &ScriptedClient, tries: u32) -> Result<(Value, TokenUsage, u32), ProviderError> {
    let options = StructuredOptions { max_tries: tries, what: "plan".into() };
    let schema = schema();
    let future = request_json(client, base_request(), &schema, options);
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

fn script(turns: Vec<ScriptTurn>) -> ScriptedClient {
    ScriptedClient::from_turns("s", turns)
}

#[test]
fn a_valid_first_answer_is_returned_with_one_try() {
    let client = script(vec![ScriptTurn::text("{\"steps\": [1, 2]}").with_usage(usage(10, 5))]);
    let (value, used, tries) = ask(&client, 3).unwrap();
    assert_eq!(value, json!({"steps": [1, 2]}));
    assert_eq!(used, usage(10, 5));
    assert_eq!(tries, 1);
    let sent = client.requests();
    let system = sent[0].system.as_deref().unwrap();
    assert!(
        system.starts_with("You are the planner.\n\nAnswer with the plan as a single JSON value")
    );
    assert!(system.contains("\"minItems\": 1"), "the schema is in the prompt: {system}");
}

#[test]
fn a_fenced_answer_is_accepted() {
    let client = script(vec![ScriptTurn::text("```json\n{\"steps\": [3]}\n```")]);
    assert_eq!(ask(&client, 3).unwrap().0, json!({"steps": [3]}));
}

#[test]
fn an_answer_in_prose_is_accepted_past_a_stray_bracket() {
    // `[1]` parses first but does not validate; the object after it does.
    let client =
        script(vec![ScriptTurn::text("As in [1], the plan is {\"steps\": [4, 5]}. Good luck!")]);
    assert_eq!(ask(&client, 3).unwrap().0, json!({"steps": [4, 5]}));
}

#[test]
fn an_invalid_answer_is_corrected_on_the_second_try() {
    let client = script(vec![
        ScriptTurn::text("{\"steps\": [\"one\"], \"extra\": true}").with_usage(usage(100, 20)),
        ScriptTurn::text("{\"steps\": [1]}").with_usage(usage(150, 8)),
    ]);
    let (value, used, tries) = ask(&client, 3).unwrap();
    assert_eq!(value, json!({"steps": [1]}));
    assert_eq!(tries, 2);
    assert_eq!(used, usage(250, 28));

    let sent = client.requests();
    assert_eq!(sent.len(), 2);
    let second = &sent[1];
    assert_eq!(second.system, sent[0].system, "the instruction is not appended twice");
    assert_eq!(second.messages.len(), 3);
    assert_eq!(
        second.messages[1],
        Message::assistant(vec![ContentBlock::text("{\"steps\": [\"one\"], \"extra\": true}")])
    );
    let ContentBlock::Text { text: feedback } = &second.messages[2].content[0] else {
        panic!("{:?}", second.messages[2]);
    };
    assert!(
        feedback.starts_with("That answer is not a valid plan. The JSON does not match"),
        "{feedback}"
    );
    assert!(feedback.contains("- at /steps/0: \"one\" is not of type \"integer\""), "{feedback}");
    assert!(
        feedback.contains(
            "- at (the root): Additional properties are not allowed ('extra' was unexpected)"
        ),
        "{feedback}"
    );
    assert!(feedback.ends_with("Answer again with only the corrected JSON, matching the schema."));
}

#[test]
fn always_invalid_is_a_typed_error_after_max_tries() {
    let client = script(vec![
        ScriptTurn::text("no idea").with_usage(usage(1, 1)),
        ScriptTurn::text("{\"steps\": []}"),
        ScriptTurn::text("{\"steps\": \"x\"}"),
        ScriptTurn::text("{\"steps\": [1]}"),
    ]);
    let err = ask(&client, 3).unwrap_err();
    let ProviderError::InvalidStructuredOutput { what, attempts, last_error } = err else {
        panic!("{err:?}");
    };
    assert_eq!(what, "plan");
    assert_eq!(attempts, 3);
    assert_eq!(
        last_error,
        "The JSON does not match the schema:\n- at /steps: \"x\" is not of type \"array\""
    );
    assert_eq!(client.remaining(), 1);
    // The first answer had no JSON at all, and the model was told so.
    let sent = client.requests();
    let ContentBlock::Text { text } = &sent[1].messages[2].content[0] else { panic!() };
    assert!(text.contains("No JSON object or array was found in the answer."), "{text}");
}

#[test]
fn many_errors_are_listed_up_to_ten() {
    let items: Vec<Value> = (0..15).map(|i| json!(format!("s{i}"))).collect();
    let answer = json!({"steps": items}).to_string();
    let client = script(vec![ScriptTurn::text(answer)]);
    let ProviderError::InvalidStructuredOutput { last_error, attempts, .. } =
        ask(&client, 1).unwrap_err()
    else {
        panic!()
    };
    assert_eq!(attempts, 1);
    assert_eq!(last_error.lines().filter(|l| l.starts_with("- at /steps/")).count(), 10);
    assert!(last_error.ends_with("- … and 5 more"), "{last_error}");
}

#[test]
fn provider_errors_pass_through() {
    let client =
        script(vec![ScriptTurn::text("nope"), ScriptTurn::failure(FailureKind::Overloaded, None)]);
    let err = ask(&client, 3).unwrap_err();
    assert!(matches!(err, ProviderError::Overloaded { .. }), "{err:?}");
}

#[test]
fn an_invalid_schema_is_a_config_error() {
    let client = script(vec![ScriptTurn::text("{}")]);
    let options = StructuredOptions::default();
    let bad = json!({"type": 12});
    let future = request_json(&client, base_request(), &bad, options);
    let err = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future);
    let Err(ProviderError::Config(message)) = err else { panic!("{err:?}") };
    assert!(message.starts_with("the JSON Schema of the JSON answer is not valid: "), "{message}");
    assert!(client.requests().is_empty(), "nothing is sent for a bad schema");
}

#[test]
fn a_cut_answer_says_so_and_a_tool_call_is_not_echoed() {
    let mut cut = ScriptTurn::blocks(vec![
        ContentBlock::ToolUse { id: "t".into(), name: "x".into(), input: json!({}) },
        ContentBlock::text("{\"steps\": [1,"),
    ]);
    cut.stop_reason = Some(StopReason::MaxTokens);
    let client = script(vec![cut, ScriptTurn::text("{\"steps\": [1]}")]);
    assert_eq!(ask(&client, 2).unwrap().2, 2);
    let sent = client.requests();
    assert_eq!(
        sent[1].messages[1],
        Message::assistant(vec![ContentBlock::text("{\"steps\": [1,")])
    );
    let ContentBlock::Text { text } = &sent[1].messages[2].content[0] else { panic!() };
    assert!(text.contains("cut off at the token limit"), "{text}");
}

#[test]
fn no_system_prompt_gets_the_instruction_alone() {
    assert!(with_instruction(None, "plan", &json!({})).starts_with("Answer with the plan"));
    assert!(with_instruction(Some(" ".into()), "plan", &json!({})).starts_with("Answer with"));
    assert_eq!(echo(&[]), Message::assistant(vec![ContentBlock::text("(no text)")]));
}

#[test]
fn the_request_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let client = script(Vec::new());
    let schema = schema();
    let future = request_json(&client, base_request(), &schema, StructuredOptions::default());
    assert_send(&future);
}

/// Some models answer with a tool call carrying the JSON, whole or under one key.
#[test]
fn an_answer_given_as_a_tool_call_is_accepted() {
    for input in [json!({"steps": [7]}), json!({"plan": {"steps": [7]}})] {
        let client = script(vec![ScriptTurn::blocks(vec![
            ContentBlock::text("Here is the plan."),
            ContentBlock::ToolUse { id: "t".into(), name: "submit_plan".into(), input },
        ])]);
        assert_eq!(ask(&client, 1).unwrap().0, json!({"steps": [7]}));
    }
    // A call whose arguments are not the answer leaves the text to decide.
    let client = script(vec![ScriptTurn::blocks(vec![
        ContentBlock::ToolUse {
            id: "t".into(),
            name: "file_read".into(),
            input: json!({"path": "a"}),
        },
        ContentBlock::text("{\"steps\": [8]}"),
    ])]);
    assert_eq!(ask(&client, 1).unwrap().0, json!({"steps": [8]}));
}

/// A refusal ends the request at once, with the model's words, without another try.
#[test]
fn a_refusal_is_a_typed_error_at_once() {
    let mut refusal = ScriptTurn::text("I can't plan that.");
    refusal.stop_reason = Some(StopReason::Refusal);
    let client = script(vec![refusal, ScriptTurn::text("{\"steps\": [1]}")]);
    let error = ask(&client, 3).unwrap_err();
    assert_eq!(
        error,
        ProviderError::Refused { what: "plan".into(), message: "I can't plan that.".into() }
    );
    assert_eq!(error.to_string(), "the model refused to write the plan: I can't plan that.");
    assert_eq!(client.remaining(), 1);
}
