//! `todo_write`: the model's working todo list, replaced whole on every call. Lighter than the
//! plan (no evidence, no checks), it keeps a long loop oriented; the rules keep it honest: at
//! most [`MAX_TODOS`] items, at most one in progress, every item with a content and an active
//! form. A refused list leaves the previous one in place, and the answer names every problem at
//! once so one retry can fix them all.

use std::fmt::Write as _;

use pev_providers::ToolSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan_state::{Reply, parse};
use super::plan_tools::schema_for;

pub const TODO_WRITE: &str = "todo_write";
pub const MAX_TODOS: usize = 20;

/// Where a todo item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// One item of the todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// What to do, in the imperative ("Run the tests").
    pub content: String,
    /// The same while it is being done ("Running the tests").
    #[serde(alias = "activeForm")]
    pub active_form: String,
    pub status: TodoStatus,
}

/// Arguments of `todo_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteArgs {
    /// The whole list; it replaces the previous one.
    pub todos: Vec<TodoItem>,
}

/// `todo_write` as the model is offered it.
pub fn todo_tool_spec() -> ToolSpec {
    ToolSpec {
        name: TODO_WRITE.to_owned(),
        description: format!(
            "Replace your todo list with this one (the whole list, at most {MAX_TODOS} items, at \
             most one in_progress; each with content and active_form). Returns the list."
        ),
        input_schema: schema_for::<TodoWriteArgs>(),
    }
}

/// Validate `input` and, if it is a good list, make it `list`; the answer is the rendered list.
pub fn write(list: &mut Vec<TodoItem>, input: Value) -> Reply {
    let args: TodoWriteArgs = parse(TODO_WRITE, input)?;
    let mut problems = Vec::new();
    if args.todos.len() > MAX_TODOS {
        problems.push(format!("{} items is too many (at most {MAX_TODOS})", args.todos.len()));
    }
    let active: Vec<usize> = args
        .todos
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == TodoStatus::InProgress)
        .map(|(i, _)| i.saturating_add(1))
        .collect();
    if active.len() > 1 {
        let items: Vec<String> = active.iter().map(usize::to_string).collect();
        problems
            .push(format!("items {} are all in_progress (at most one may be)", items.join(", ")));
    }
    for (i, todo) in args.todos.iter().enumerate() {
        let n = i.saturating_add(1);
        if todo.content.trim().is_empty() {
            problems.push(format!("item {n}: content is empty"));
        }
        if todo.active_form.trim().is_empty() {
            problems.push(format!("item {n}: active_form is empty"));
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "todo_write refused (the previous list is unchanged):\n- {}",
            problems.join("\n- ")
        ));
    }
    *list = args
        .todos
        .into_iter()
        .map(|t| TodoItem {
            content: t.content.trim().to_owned(),
            active_form: t.active_form.trim().to_owned(),
            status: t.status,
        })
        .collect();
    Ok(render(list))
}

/// The list as the model reads it: `[x] done`, `[~] doing (active form)`, `[ ] to do`.
pub fn render(list: &[TodoItem]) -> String {
    if list.is_empty() {
        return "Todo list: empty.\n".to_owned();
    }
    let done = list.iter().filter(|t| t.status == TodoStatus::Completed).count();
    let mut out = format!("Todo list ({done} of {} completed):\n", list.len());
    for todo in list {
        let _ = match todo.status {
            TodoStatus::Completed => writeln!(out, "[x] {}", todo.content),
            TodoStatus::InProgress => writeln!(out, "[~] {}", todo.active_form),
            TodoStatus::Pending => writeln!(out, "[ ] {}", todo.content),
        };
    }
    out
}

#[cfg(test)]
#[path = "todo_tests.rs"]
mod tests;
