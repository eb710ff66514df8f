//! Tests of `todo_write`: whole-list replacement, its rules and their messages, the rendering.

use serde_json::json;

use super::*;

fn item(content: &str, active: &str, status: &str) -> Value {
    json!({"content": content, "active_form": active, "status": status})
}

#[test]
fn a_good_list_replaces_the_old_one_and_is_rendered() {
    let mut list = vec![TodoItem {
        content: "old".into(),
        active_form: "Doing old".into(),
        status: TodoStatus::Pending,
    }];
    let reply = write(
        &mut list,
        json!({"todos": [
            item("Read the stylesheet", "Reading the stylesheet", "completed"),
            item(" Patch the body rule ", "Patching the body rule", "in_progress"),
            item("Run the tests", "Running the tests", "pending"),
        ]}),
    )
    .unwrap();
    assert_eq!(
        reply,
        "Todo list (1 of 3 completed):\n\
         [x] Read the stylesheet\n\
         [~] Patching the body rule\n\
         [ ] Run the tests\n"
    );
    assert_eq!(list.len(), 3);
    assert_eq!(list[1].content, "Patch the body rule");
    assert_eq!(list[1].status, TodoStatus::InProgress);

    assert_eq!(write(&mut list, json!({"todos": []})).unwrap(), "Todo list: empty.\n");
    assert!(list.is_empty());
}

#[test]
fn a_bad_list_is_refused_with_every_problem_and_the_old_list_stays() {
    let old = vec![TodoItem {
        content: "keep me".into(),
        active_form: "Keeping".into(),
        status: TodoStatus::Pending,
    }];
    let mut list = old.clone();
    let err = write(
        &mut list,
        json!({"todos": [
            item("A", "Doing A", "in_progress"),
            item(" ", "Doing B", "pending"),
            item("C", "", "in_progress"),
        ]}),
    )
    .unwrap_err();
    assert_eq!(
        err,
        "todo_write refused (the previous list is unchanged):\n\
         - items 1, 3 are all in_progress (at most one may be)\n\
         - item 2: content is empty\n\
         - item 3: active_form is empty"
    );
    assert_eq!(list, old);
}

#[test]
fn more_than_twenty_items_are_refused() {
    let mut list = Vec::new();
    let todos: Vec<Value> = (0..21).map(|i| item(&format!("t{i}"), "doing", "pending")).collect();
    let err = write(&mut list, json!({ "todos": todos })).unwrap_err();
    assert_eq!(
        err,
        "todo_write refused (the previous list is unchanged):\n- 21 items is too many (at most 20)"
    );
    let todos: Vec<Value> = (0..20).map(|i| item(&format!("t{i}"), "doing", "pending")).collect();
    write(&mut list, json!({ "todos": todos })).unwrap();
    assert_eq!(list.len(), 20);
}

#[test]
fn malformed_items_name_the_field() {
    let mut list = Vec::new();
    let err =
        write(&mut list, json!({"todos": [{"content": "a", "status": "pending"}]})).unwrap_err();
    assert_eq!(err, "invalid arguments for todo_write at todos[0]: missing field `active_form`");
    let err = write(&mut list, json!({"todos": [item("a", "b", "doing")]})).unwrap_err();
    assert!(
        err.starts_with(
            "invalid arguments for todo_write at todos[0].status: unknown variant `doing`"
        ),
        "{err}"
    );
}

#[test]
fn the_spec_is_derived_from_the_argument_struct() {
    let spec = todo_tool_spec();
    assert_eq!(spec.name, "todo_write");
    let item = &spec.input_schema["properties"]["todos"]["items"];
    assert_eq!(item["required"], json!(["content", "active_form", "status"]));
    assert_eq!(
        item["properties"]["status"]["enum"],
        json!(["pending", "in_progress", "completed"])
    );
}
