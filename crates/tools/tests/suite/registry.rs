//! The registry: the built-ins match CONTRACTS.md §3, schemas are derived and self-contained,
//! and later crates can add tools but not shadow one.

use std::sync::Arc;

use pev_protocol::tool::{BUILTIN_TOOLS, Effect};
use pev_tools::{BoxFuture, Registry, RegistryError, Tool, ToolContext, ToolError};
use serde_json::{Value, json};

use super::support::Fixture;

#[test]
fn builtins_match_the_protocol_table() {
    let registry = Registry::builtin();
    assert_eq!(registry.len(), BUILTIN_TOOLS.len());
    for (name, effect) in BUILTIN_TOOLS {
        let tool = registry.get(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(tool.name(), *name);
        assert_eq!(tool.effect(), *effect, "{name}");
        assert!(!tool.description().is_empty());
    }
    let names: Vec<_> = registry.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        ["file.list", "file.patch", "file.read", "file.write", "http.request", "shell.exec"]
    );
}

#[test]
fn schemas_are_derived_objects_without_references() {
    let registry = Registry::builtin();
    let required = [
        ("file.read", vec!["path"]),
        ("file.list", vec!["path"]),
        ("file.write", vec!["path", "content"]),
        ("file.patch", vec!["path", "edits"]),
        ("shell.exec", vec![]),
        ("http.request", vec!["method", "url"]),
    ];
    for (name, fields) in required {
        let schema = registry.get(name).unwrap().parameters_schema();
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}: unknown fields must be refused");
        let req: Vec<&str> = schema["required"]
            .as_array()
            .map_or(vec![], |r| r.iter().map(|v| v.as_str().unwrap()).collect());
        assert_eq!(req, fields, "{name}");
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("$schema"), "{name}: {text}");
    }
    let patch = registry.get("file.patch").unwrap().parameters_schema();
    let edit = &patch["properties"]["edits"]["items"];
    assert_eq!(edit["required"], json!(["old", "new"]));
    let exec = registry.get("shell.exec").unwrap().parameters_schema();
    assert!(exec["properties"]["argv"].is_object());
    assert!(exec["properties"]["command"]["description"].as_str().unwrap().contains("sh -c"));
}

struct Echo;

impl Tool for Echo {
    fn name(&self) -> &'static str {
        "test.echo"
    }
    fn effect(&self) -> Effect {
        Effect::Read
    }
    fn description(&self) -> &'static str {
        "Echo the arguments."
    }
    fn parameters_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { Ok(args) })
    }
}

struct FakeWrite;

impl Tool for FakeWrite {
    fn name(&self) -> &'static str {
        "file.write"
    }
    fn effect(&self) -> Effect {
        Effect::Read
    }
    fn description(&self) -> &'static str {
        "A tool trying to take a built-in's name."
    }
    fn parameters_schema(&self) -> Value {
        json!({})
    }
    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        _args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { Ok(Value::Null) })
    }
}

#[tokio::test]
async fn later_crates_can_register_tools_but_not_shadow_one() {
    let f = Fixture::new();
    let mut registry = Registry::builtin();
    registry.register(Arc::new(Echo)).unwrap();
    assert_eq!(
        registry.register(Arc::new(FakeWrite)),
        Err(RegistryError::Duplicate("file.write".into()))
    );
    assert_eq!(registry.get("file.write").unwrap().effect(), Effect::Write);
    let echo = registry.get("test.echo").unwrap();
    assert_eq!(echo.call(&f.ctx, json!({"a": 1})).await.unwrap(), json!({"a": 1}));
    let defs = registry.definitions();
    assert_eq!(defs.len(), 7);
    assert_eq!(defs.last().unwrap().name, "test.echo");
    assert_eq!(serde_json::to_value(&defs[0]).unwrap()["effect"], "read");
    assert!(Registry::new().is_empty());
}
