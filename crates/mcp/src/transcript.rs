//! A checklist from a client's own transcript, for a session that made no pev plan
//! (`pev gate --from-transcript`): the latest Claude Code `TodoWrite` list (each call replaces the
//! list), its `TaskCreate` / `TaskUpdate` tasks, and Codex's `update_plan` (whose arguments are a
//! JSON string inside a rollout line). The items are the client's own account; the gate uses them
//! only to refuse a stop while one is open, never to claim anything is done.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

/// The largest transcript read (a long session's JSONL is a few MB).
const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// One item of the client's checklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub text: String,
    pub status: String,
    pub done: bool,
}

/// The checklist the transcript ends with. An unreadable transcript is an error (the gate fails
/// closed); a transcript without todo calls is an empty list.
pub fn read(path: &Path) -> Result<Vec<Item>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read the transcript {}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > MAX_BYTES {
        return Err(format!("the transcript {} is larger than {MAX_BYTES} bytes", path.display()));
    }
    let mut list = Checklist::default();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        // A line that is not JSON (a partial write at the end) is skipped, not fatal.
        if let Ok(value) = serde_json::from_str::<Value>(&line) {
            list.line(&value);
        }
    }
    Ok(list.items())
}

#[derive(Debug, Default)]
struct Checklist {
    /// The latest TodoWrite or update_plan list.
    todos: Vec<Item>,
    /// TaskCreate tasks by id ("1", "2", … in creation order).
    tasks: BTreeMap<u64, Item>,
    next_task: u64,
}

impl Checklist {
    fn line(&mut self, value: &Value) {
        // Claude Code: {"type":"assistant","message":{"content":[{"type":"tool_use",…}]}}
        if let Some(blocks) = value.pointer("/message/content").and_then(Value::as_array) {
            for block in blocks.iter().filter(|b| b["type"] == "tool_use") {
                let input = &block["input"];
                match block["name"].as_str().unwrap_or_default() {
                    "TodoWrite" => self.todos = items(input.get("todos"), "content"),
                    "TaskCreate" => {
                        self.next_task = self.next_task.saturating_add(1);
                        let text = input["subject"].as_str().unwrap_or_default().to_owned();
                        let item = Item { text, status: "pending".to_owned(), done: false };
                        self.tasks.insert(self.next_task, item);
                    }
                    "TaskUpdate" => self.task_update(input),
                    _ => {}
                }
            }
        }
        // Codex: {"type":"response_item","payload":{"type":"function_call","name":"update_plan",
        // "arguments":"{\"plan\":[…]}"}}
        let payload = &value["payload"];
        if payload["type"] == "function_call" && payload["name"] == "update_plan" {
            let arguments = match &payload["arguments"] {
                Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                other => other.clone(),
            };
            self.todos = items(arguments.get("plan"), "step");
        }
    }

    fn task_update(&mut self, input: &Value) {
        let id = match &input["taskId"] {
            Value::String(s) => s.trim_start_matches('#').parse().ok(),
            Value::Number(n) => n.as_u64(),
            _ => None,
        };
        let Some(id) = id else { return };
        let Some(status) = input["status"].as_str() else { return };
        if status == "deleted" {
            self.tasks.remove(&id);
        } else if let Some(task) = self.tasks.get_mut(&id) {
            task.done = status == "completed";
            task.status = status.to_owned();
        }
    }

    fn items(self) -> Vec<Item> {
        let mut out = self.todos;
        out.extend(self.tasks.into_values());
        out
    }
}

fn items(list: Option<&Value>, text_key: &str) -> Vec<Item> {
    list.and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|item| {
                    let status = item["status"].as_str().unwrap_or("pending").to_owned();
                    Item {
                        text: item[text_key].as_str().unwrap_or_default().to_owned(),
                        done: status == "completed",
                        status,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lines: &[&str]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        for line in lines {
            std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()).unwrap();
        }
        file
    }

    #[test]
    fn the_latest_todo_write_list_is_the_checklist() {
        let file = write(&[
            r#"{"type":"user","message":{"role":"user","content":"do it"}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"TodoWrite","input":{"todos":[{"content":"A","status":"pending","activeForm":"Doing A"}]}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t2","name":"TodoWrite","input":{"todos":[{"content":"A","status":"completed","activeForm":"Doing A"},{"content":"B","status":"in_progress","activeForm":"Doing B"}]}}]}}"#,
            "{ torn line",
        ]);
        let items = read(file.path()).unwrap();
        assert_eq!(items.len(), 2);
        assert!(items[0].done);
        assert_eq!((items[1].text.as_str(), items[1].done), ("B", false));
    }

    #[test]
    fn tasks_are_created_updated_and_deleted_by_id() {
        let file = write(&[
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TaskCreate","input":{"subject":"one","description":"d"}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TaskCreate","input":{"subject":"two","description":"d"}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TaskCreate","input":{"subject":"three","description":"d"}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TaskUpdate","input":{"taskId":"1","status":"completed"}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TaskUpdate","input":{"taskId":"3","status":"deleted"}}]}}"#,
        ]);
        let items = read(file.path()).unwrap();
        let open: Vec<&str> = items.iter().filter(|i| !i.done).map(|i| i.text.as_str()).collect();
        assert_eq!(open, ["two"]);
        assert_eq!(items.len(), 2);
    }

    #[test]
    fn codex_update_plan_arguments_are_a_json_string() {
        let file = write(&[
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"update_plan","arguments":"{\"plan\":[{\"step\":\"Edit a.txt\",\"status\":\"completed\"},{\"step\":\"Run tests\",\"status\":\"pending\"}]}","call_id":"c1"}}"#,
        ]);
        let items = read(file.path()).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!((items[1].text.as_str(), items[1].done), ("Run tests", false));
    }

    #[test]
    fn a_missing_transcript_is_an_error() {
        let err = read(Path::new("/nonexistent/transcript.jsonl")).unwrap_err();
        assert!(err.contains("cannot read the transcript"), "{err}");
    }
}
