//! `pev mcp`, `pev gate` and `pev integrate`: pev inside Claude Code, Codex and other MCP
//! clients. The work is `pev-mcp`'s; this module finds the workspace and journal, builds the
//! tool context (with the run's sandbox, as `pev run` does) and prints.
//!
//! The workspace is `--workspace`, else `$CLAUDE_PROJECT_DIR` (Claude Code sets it for the servers
//! and hooks it starts), else (for the gate) the hook payload's `cwd`, else the current directory.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pev_mcp::gate::{GateEnv, GateOptions};
use pev_mcp::integrate::Wiring;
use pev_mcp::session::session_from_env;
use pev_mcp::{Server, Sessions};
use pev_tools::ToolContext;

use crate::shared::exit::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Fail, exit_code};

/// The largest hook payload read (Claude Code's carry the last assistant message).
const MAX_PAYLOAD: u64 = 16 * 1024 * 1024;

pub(crate) use crate::args::values::Place;

fn runtime() -> Result<tokio::runtime::Runtime, Fail> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot start the runtime: {e}")))
}

/// `pev mcp`: serves stdin/stdout until stdin closes (or HTTP on a loopback address).
pub(crate) fn mcp(place: &Place, http: Option<&str>, err: &mut dyn Write) -> Result<u8, Fail> {
    let (ctx, db) = place.open(None).map_err(|m| Fail(EXIT_BAD_INPUT, m))?;
    if let Some(addr) = http {
        let listener = pev_mcp::http::bind(addr).map_err(|e| Fail(EXIT_BAD_INPUT, e.0))?;
        let local = listener.local_addr().map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        let server = Server::new(Arc::new(Sessions::shared(ctx, db)), env!("CARGO_PKG_VERSION"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Fail(EXIT_FAILED, format!("cannot start the runtime: {e}")))?;
        let _ = writeln!(err, "pev mcp: listening on http://{local}/mcp");
        pev_mcp::http::serve(&listener, &server, &Arc::new(runtime))
            .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
        return Ok(EXIT_OK);
    }
    let env = |name: &str| std::env::var(name).ok();
    let session = session_from_env(&env).map(|(id, _)| id);
    let sessions = Arc::new(Sessions::new(ctx, db, session));
    let server = Server::new(sessions, env!("CARGO_PKG_VERSION"));
    let runtime = runtime()?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    pev_mcp::stdio::serve(&server, stdin.lock(), stdout.lock(), &runtime)
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    Ok(EXIT_OK)
}

struct CliGateEnv<'a>(&'a Place);

impl GateEnv for CliGateEnv<'_> {
    fn open(&self, cwd: Option<&str>) -> Result<(Arc<ToolContext>, PathBuf), String> {
        self.0.open(cwd)
    }
}

/// `pev gate`: one hook payload on stdin, the answer on stdout. Always exit 0 with JSON (the
/// clients read JSON only then); a failure inside is a refusal, not an exit code.
pub(crate) fn gate(
    place: &Place,
    options: &GateOptions,
    record: bool,
    out: &mut dyn Write,
) -> Result<u8, Fail> {
    let mut input = Vec::new();
    let read = std::io::stdin().lock().take(MAX_PAYLOAD).read_to_end(&mut input);
    if let Err(e) = read {
        input = format!("unreadable: {e}").into_bytes();
    }
    if record {
        input = force_post_tool_use(&input);
    }
    let runtime = runtime()?;
    let reply = runtime.block_on(pev_mcp::gate::gate(&input, options, &CliGateEnv(place)));
    if let Some(json) = reply.stdout {
        writeln!(out, "{json}")
            .map_err(|e| Fail(EXIT_FAILED, format!("cannot write stdout: {e}")))?;
    }
    Ok(reply.exit)
}

/// `--record`: the payload is a PostToolUse whatever it says (a client that names the event
/// differently still gets its call recorded, and nothing is ever blocked).
fn force_post_tool_use(input: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(input) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.insert("hook_event_name".to_owned(), "PostToolUse".into());
            serde_json::Value::Object(map).to_string().into_bytes()
        }
        _ => br#"{"hook_event_name":"PostToolUse"}"#.to_vec(),
    }
}

/// `pev gate status`: the run result as JSON; exit 0 success, 3 partial, 1 failed.
pub(crate) fn gate_status(
    place: &Place,
    session: Option<&str>,
    run: Option<&str>,
    out: &mut dyn Write,
) -> Result<u8, Fail> {
    let (ctx, db) = place.open(None).map_err(|m| Fail(EXIT_BAD_INPUT, m))?;
    let runtime = runtime()?;
    let result = runtime
        .block_on(pev_mcp::gate::status(session, run, &ctx, &db))
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    let text =
        serde_json::to_string_pretty(&result).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    writeln!(out, "{text}").map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    Ok(exit_code(result.status))
}

/// The verdict on an open `pev mcp` run now (for `pev show`).
pub(crate) fn verdict_now(
    place: &Place,
    run_id: &str,
) -> Result<pev_protocol::run::RunResult, Fail> {
    let (ctx, db) = place.open(None).map_err(|m| Fail(EXIT_BAD_INPUT, m))?;
    let store =
        pev_store::Store::open_existing(&db).map_err(|e| Fail(EXIT_FAILED, e.to_string()))?;
    runtime()?
        .block_on(pev_mcp::verdict::verdict(&store, run_id, &ctx))
        .map_err(|e| Fail(EXIT_FAILED, e.to_string()))
}

pub(crate) use crate::args::values::Client;

/// `pev integrate`.
pub(crate) struct IntegrateRequest {
    pub client: Client,
    pub user: bool,
    pub plugin: Option<PathBuf>,
    pub print: bool,
    pub workspace: Option<PathBuf>,
}

pub(crate) fn integrate(
    req: &IntegrateRequest,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    let pev = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Fail(EXIT_FAILED, format!("cannot find pev's own path: {e}")))?;
    let project = match &req.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| Fail(EXIT_FAILED, e.to_string()))?,
    };
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| Fail(EXIT_BAD_INPUT, "HOME is not set".to_owned()))
    };
    let wiring = match (req.client, &req.plugin, req.user) {
        (Client::Claude, Some(dir), _) => pev_mcp::integrate::claude_plugin(dir, &pev),
        (Client::Claude, None, true) => pev_mcp::integrate::claude_user(&home()?, &pev),
        (Client::Claude, None, false) => pev_mcp::integrate::claude_project(&project, &pev),
        (Client::Codex, Some(_), _) => {
            return Err(Fail(EXIT_BAD_INPUT, "--plugin is for Claude Code".to_owned()));
        }
        (Client::Codex, None, true) => {
            let dir = std::env::var_os("CODEX_HOME").map(PathBuf::from);
            let dir = match dir {
                Some(dir) => dir,
                None => home()?.join(".codex"),
            };
            pev_mcp::integrate::codex(&dir, &pev)
        }
        (Client::Codex, None, false) => pev_mcp::integrate::codex(&project.join(".codex"), &pev),
    }
    .map_err(|m| Fail(EXIT_BAD_INPUT, m))?;
    write_wiring(&wiring, req.print, out, err)
}

fn write_wiring(
    wiring: &Wiring,
    print: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Fail> {
    let io = |e: std::io::Error| Fail(EXIT_FAILED, e.to_string());
    for file in &wiring.files {
        if print {
            writeln!(out, "# {}\n{}", file.path.display(), file.content).map_err(io)?;
            continue;
        }
        if file.unchanged {
            writeln!(out, "unchanged  {}", file.path.display()).map_err(io)?;
            continue;
        }
        write_file(&file.path, &file.content)
            .map_err(|e| Fail(EXIT_FAILED, format!("cannot write {}: {e}", file.path.display())))?;
        writeln!(out, "wrote      {}", file.path.display()).map_err(io)?;
    }
    for note in &wiring.notes {
        writeln!(err, "note: {note}").map_err(io)?;
    }
    Ok(EXIT_OK)
}

/// Writes through a temporary file and a rename, so a crash never leaves half a settings file.
fn write_file(path: &Path, content: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("pev-tmp");
    std::fs::write(&tmp, content)?;
    std::fs::rename(&tmp, path)
}
