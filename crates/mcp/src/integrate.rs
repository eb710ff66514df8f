//! `pev integrate claude|codex`: the files that wire pev into a client, computed here and written
//! (or printed) by the command line. Existing files are merged, never replaced: other MCP servers,
//! other hooks and other settings are kept, and a pev entry already present is left as it is.
//!
//! - Claude Code, project: `.mcp.json` (the `pev` server), `.claude/settings.json` (Stop,
//!   SubagentStop, SessionStart and PostToolUse hooks running `pev gate`, and the server enabled).
//! - Claude Code, plugin: a plugin directory (`.claude-plugin/plugin.json`, `hooks/hooks.json`,
//!   `.mcp.json`) for `claude --plugin-dir`.
//! - Claude Code, user: the hooks in `~/.claude/settings.json`; the server is added with
//!   `claude mcp add` (its user file is Claude Code's own).
//! - Codex: `[mcp_servers.pev]` in `config.toml` and `hooks.json` beside it (user: `~/.codex`;
//!   project: `.codex`). Codex skips hooks until the user trusts them; pev says how, and never
//!   writes Codex's trust hashes.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOut {
    pub path: PathBuf,
    pub content: String,
    /// The file exists and already says this.
    pub unchanged: bool,
}

/// What `pev integrate` does: files, and what the person must still do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wiring {
    pub files: Vec<FileOut>,
    pub notes: Vec<String>,
}

/// Seconds a hook may run (both clients count in seconds): above the gate's own deadline
/// (540 s), so the gate refuses an unfinished check before the client gives up on it.
const HOOK_TIMEOUT: u64 = 600;

/// Claude Code's hook events the gate answers, with their matchers.
const CLAUDE_HOOKS: [(&str, Option<&str>, &str); 4] = [
    ("Stop", None, "gate"),
    ("SubagentStop", None, "gate"),
    ("SessionStart", None, "gate"),
    ("PostToolUse", Some("Bash|Write|Edit|MultiEdit|NotebookEdit"), "gate --record"),
];

/// Codex's (its hooks.json takes the same shape; timeouts in seconds).
const CODEX_HOOKS: [(&str, Option<&str>, &str); 3] = [
    ("Stop", None, "gate"),
    ("SessionStart", None, "gate"),
    ("PostToolUse", None, "gate --record"),
];

/// `pev` as a command in a JSON or TOML file: its absolute path, quoted for a shell if needed.
fn shell_word(pev: &Path) -> String {
    let text = pev.display().to_string();
    if text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c)) {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Claude Code in a project: `.mcp.json` and `.claude/settings.json`.
pub fn claude_project(project: &Path, pev: &Path) -> Result<Wiring, String> {
    let mcp = project.join(".mcp.json");
    let settings = project.join(".claude").join("settings.json");
    let mut settings_doc = read_json(&settings)?;
    add_hooks(&mut settings_doc, pev, &CLAUDE_HOOKS, Some(HOOK_TIMEOUT))?;
    enable_server(&mut settings_doc)?;
    let mut mcp_doc = read_json(&mcp)?;
    add_server(&mut mcp_doc, pev)?;
    Ok(Wiring {
        files: vec![file(&mcp, &mcp_doc)?, file(&settings, &settings_doc)?],
        notes: vec![
            "Claude Code starts `pev mcp` for this project and runs `pev gate` when it wants to \
             stop; `pev show last` shows what the session did and why it ended as it did."
                .to_owned(),
        ],
    })
}

/// Claude Code for every project of the user: the hooks in `~/.claude/settings.json`.
pub fn claude_user(home: &Path, pev: &Path) -> Result<Wiring, String> {
    let settings = home.join(".claude").join("settings.json");
    let mut doc = read_json(&settings)?;
    add_hooks(&mut doc, pev, &CLAUDE_HOOKS, Some(HOOK_TIMEOUT))?;
    Ok(Wiring {
        files: vec![file(&settings, &doc)?],
        notes: vec![format!(
            "Add the MCP server for every project with: claude mcp add --scope user pev -- {} mcp",
            shell_word(pev)
        )],
    })
}

/// A Claude Code plugin directory, for `claude --plugin-dir DIR`.
pub fn claude_plugin(dir: &Path, pev: &Path) -> Result<Wiring, String> {
    let manifest = json!({
        "name": "pev",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Plans checked by the harness: pev's plan tools over MCP, and a Stop hook \
                        that re-checks the plan against the workspace before Claude may stop.",
    });
    let mut hooks = json!({"description": "pev's stop gate", "hooks": {}});
    add_hooks(&mut hooks, pev, &CLAUDE_HOOKS, Some(HOOK_TIMEOUT))?;
    let mut mcp = json!({});
    add_server(&mut mcp, pev)?;
    Ok(Wiring {
        files: vec![
            file(&dir.join(".claude-plugin").join("plugin.json"), &manifest)?,
            file(&dir.join("hooks").join("hooks.json"), &hooks)?,
            file(&dir.join(".mcp.json"), &mcp)?,
        ],
        notes: vec![format!("Start Claude Code with: claude --plugin-dir {}", dir.display())],
    })
}

/// Codex: `[mcp_servers.pev]` in `config.toml` and `hooks.json` beside it, in `codex_dir`
/// (`~/.codex`, or a project's `.codex`).
pub fn codex(codex_dir: &Path, pev: &Path) -> Result<Wiring, String> {
    let config = codex_dir.join("config.toml");
    let hooks_path = codex_dir.join("hooks.json");
    let existing = match std::fs::read_to_string(&config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", config.display())),
    };
    let has_server = existing.lines().any(|l| {
        let l = l.trim();
        l == "[mcp_servers.pev]" || l == "[mcp_servers.\"pev\"]"
    });
    let content = if has_server {
        existing.clone()
    } else {
        let mut text = existing.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let command = pev.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
        text.push_str(&format!(
            "# pev's plan tools (pev integrate codex)\n[mcp_servers.pev]\ncommand = \"{command}\"\nargs = [\"mcp\"]\n"
        ));
        text
    };
    let mut hooks = read_json(&hooks_path)?;
    add_hooks(&mut hooks, pev, &CODEX_HOOKS, Some(HOOK_TIMEOUT))?;
    Ok(Wiring {
        files: vec![
            FileOut { unchanged: content == existing, path: config, content },
            file(&hooks_path, &hooks)?,
        ],
        notes: vec![format!(
            "Codex skips hooks until you trust them, so the stop gate is not active yet. Trust it \
             once: start `codex`, type /hooks, select each pev hook and press t (any later change \
             to {} needs trusting again). In automation, `codex exec \
             --dangerously-bypass-hook-trust` runs hooks without it. pev never writes Codex's \
             trust hashes.",
            hooks_path.display()
        )],
    })
}

fn file(path: &Path, doc: &Value) -> Result<FileOut, String> {
    let mut content = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    content.push('\n');
    let unchanged = std::fs::read_to_string(path).is_ok_and(|old| old == content);
    Ok(FileOut { path: path.to_path_buf(), content, unchanged })
}

fn read_json(path: &Path) -> Result<Value, String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(json!({})),
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err(format!("{} is not a JSON object; fix or move it first", path.display())),
            Err(e) => Err(format!(
                "{} is not valid JSON ({e}); fix or move it first, pev will not overwrite it",
                path.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn object<'a>(
    parent: &'a mut Value,
    key: &str,
    file: &str,
) -> Result<&'a mut Map<String, Value>, String> {
    let map = parent.as_object_mut().ok_or_else(|| format!("{file}: not a JSON object"))?;
    map.entry(key.to_owned())
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| format!("{file}: `{key}` is not an object"))
}

fn add_server(doc: &mut Value, pev: &Path) -> Result<(), String> {
    let servers = object(doc, "mcpServers", ".mcp.json")?;
    servers.entry("pev").or_insert_with(
        || json!({"type": "stdio", "command": pev.display().to_string(), "args": ["mcp"]}),
    );
    Ok(())
}

fn enable_server(doc: &mut Value) -> Result<(), String> {
    let map = doc.as_object_mut().ok_or("settings.json: not a JSON object")?;
    let list = map.entry("enabledMcpjsonServers").or_insert_with(|| json!([]));
    let list = list.as_array_mut().ok_or("settings.json: `enabledMcpjsonServers` is not a list")?;
    if !list.iter().any(|v| v == "pev") {
        list.push(json!("pev"));
    }
    Ok(())
}

/// Adds `pev gate` to each event's hooks unless a pev gate hook is there already.
fn add_hooks(
    doc: &mut Value,
    pev: &Path,
    events: &[(&str, Option<&str>, &str)],
    timeout: Option<u64>,
) -> Result<(), String> {
    let hooks = object(doc, "hooks", "hooks")?;
    for (event, matcher, args) in events {
        let list = hooks.entry((*event).to_owned()).or_insert_with(|| json!([]));
        let list = list.as_array_mut().ok_or_else(|| format!("hooks.{event} is not a list"))?;
        let present = list.iter().any(|group| {
            group["hooks"].as_array().is_some_and(|hs| {
                hs.iter().any(|h| h["command"].as_str().is_some_and(|c| c.contains(" gate")))
            })
        });
        if present {
            continue;
        }
        let mut hook = json!({"type": "command", "command": format!("{} {args}", shell_word(pev))});
        if let Some(timeout) = timeout {
            hook["timeout"] = json!(timeout);
        }
        let mut group = json!({"hooks": [hook]});
        if let Some(matcher) = matcher {
            group["matcher"] = json!(matcher);
        }
        list.push(group);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEV: &str = "/opt/pev/bin/pev";

    #[test]
    fn claude_project_merges_into_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        std::fs::write(
            dir.path().join(".claude/settings.json"),
            r#"{"model":"x","hooks":{"Stop":[{"hooks":[{"type":"command","command":"./mine.sh"}]}]}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join(".mcp.json"), r#"{"mcpServers":{"other":{"command":"o"}}}"#)
            .unwrap();
        let wiring = claude_project(dir.path(), Path::new(PEV)).unwrap();
        let settings: Value = serde_json::from_str(&wiring.files[1].content).unwrap();
        assert_eq!(settings["model"], "x");
        let stop = settings["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 2, "the user's hook is kept");
        assert_eq!(stop[1]["hooks"][0]["command"], format!("{PEV} gate"));
        assert_eq!(
            settings["hooks"]["PostToolUse"][0]["matcher"],
            "Bash|Write|Edit|MultiEdit|NotebookEdit"
        );
        assert_eq!(settings["enabledMcpjsonServers"], json!(["pev"]));
        let mcp: Value = serde_json::from_str(&wiring.files[0].content).unwrap();
        assert_eq!(mcp["mcpServers"]["other"]["command"], "o");
        assert_eq!(mcp["mcpServers"]["pev"]["args"], json!(["mcp"]));
        // Written, then asked again: nothing to change.
        for f in &wiring.files {
            std::fs::write(&f.path, &f.content).unwrap();
        }
        let again = claude_project(dir.path(), Path::new(PEV)).unwrap();
        assert!(again.files.iter().all(|f| f.unchanged));
    }

    #[test]
    fn a_broken_settings_file_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join(".claude/settings.json"), "{ nope").unwrap();
        let err = claude_project(dir.path(), Path::new(PEV)).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn codex_gets_a_server_table_and_hooks_without_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "model = \"gpt-5\"").unwrap();
        let wiring = codex(dir.path(), Path::new(PEV)).unwrap();
        let config = &wiring.files[0].content;
        assert!(config.starts_with("model = \"gpt-5\"\n\n"), "{config}");
        assert!(
            config
                .contains("[mcp_servers.pev]\ncommand = \"/opt/pev/bin/pev\"\nargs = [\"mcp\"]\n")
        );
        let hooks: Value = serde_json::from_str(&wiring.files[1].content).unwrap();
        assert_eq!(hooks.as_object().unwrap().keys().collect::<Vec<_>>(), ["hooks"]);
        assert_eq!(hooks["hooks"]["Stop"][0]["hooks"][0]["timeout"], 600);
        assert!(wiring.notes[0].contains("/hooks"));
        std::fs::write(&wiring.files[0].path, config).unwrap();
        assert!(codex(dir.path(), Path::new(PEV)).unwrap().files[0].unchanged);
    }

    #[test]
    fn a_plugin_has_a_manifest_hooks_and_servers() {
        let dir = tempfile::tempdir().unwrap();
        let wiring = claude_plugin(dir.path(), Path::new("/a b/pev")).unwrap();
        let names: Vec<String> = wiring
            .files
            .iter()
            .map(|f| f.path.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(names, [".claude-plugin/plugin.json", "hooks/hooks.json", ".mcp.json"]);
        let hooks: Value = serde_json::from_str(&wiring.files[1].content).unwrap();
        assert_eq!(hooks["hooks"]["Stop"][0]["hooks"][0]["command"], "'/a b/pev' gate");
    }
}
