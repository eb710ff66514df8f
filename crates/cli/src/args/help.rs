//! The help texts the command line teaches with: each subcommand's examples and notes (clap's
//! `after_help`), and the exit codes. Kept apart from `args.rs`'s definitions so that both
//! stay readable; `tests/reference_doc.rs` holds `--help` to the reference, byte for byte.

pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0  success (run, agent: verified; lint: the plan passes or has only warnings)
  1  failed (run, agent), or the plan has lint errors
  2  bad input or usage: a file that cannot be read or parsed, a plan that does not match the
     schema or has lint errors (run), an unknown option
  3  partial: some work was done but the evidence is incomplete (run, agent)
  4  awaiting approval (run, agent): `pev approve RUN`, then `pev resume RUN`

Start here:
  pev run examples/dark-green/plan.json --workspace examples/dark-green/site --scratch
  pev show last --workspace <the scratch copy it prints>";

pub(crate) const LINT_HELP: &str = "\
Examples:
  pev lint plan.json
  pev lint examples/lint/refund.yaml --policy examples/lint/policy.yaml
  cat plan.json | pev lint - --format json
  pev lint plan.yaml --format sarif > pev.sarif
  pev lint --explain SQL_INJECTION
  pev lint --explain all

Exit codes:
  0  pass, or only warnings
  1  errors (or the risk score reaches the threshold)
  2  bad input: unreadable file, invalid JSON or YAML (with line and column), a plan that does
     not match the schema (reported as SCHEMA_INVALID findings), a bad policy";

pub(crate) const RUN_HELP: &str = "\
Examples:
  pev run examples/dark-green/plan.json --workspace examples/dark-green/site --scratch
  pev run plan.yaml --policy policy.yaml --jobs 8
  pev run plan.json --json | jq -c 'select(.event == \"step.finished\")'
  pev run plan.json --yes            # approve every step that needs approval
  pev run plan.json --cache          # reuse the verified results of unchanged steps

Exit codes:
  0  success: every step done, every assertion and postcondition verified
  1  failed: a step failed (or nothing was done), or the journal failed
  2  bad input: unreadable or invalid plan, lint errors, a step without a tool, bad workspace
  3  partial: some work was done, but the evidence is incomplete (see the reasons)
  4  awaiting approval: `pev approve RUN` then `pev resume RUN`";

pub(crate) const AGENT_HELP: &str = "\
Examples:
  pev agent \"Change the site background to dark green\" --workspace site --max-usd 0.50
  pev agent \"Add a CHANGELOG entry for 1.2\" --approve-plan --max-replans 1
  pev agent \"Fix the failing test\" --json > events.jsonl

Offline: point the roles at scripted models in pev.toml (provider = \"script:FILE\"), see
examples/agent/. Exit codes are those of `pev run`.";

pub(crate) const RESUME_HELP: &str = "\
Examples:
  pev resume 20261121-142233-3fa9c1
  pev resume last --yes
  pev resume 2026112 --workspace site      # a unique prefix is enough

Steps the journal shows done are not run again. A write or patch that was under way when the
run stopped is checked by content hash: applied already (recorded, not applied twice), not
applied (run now), or changed by someone else (the step fails). Other interrupted calls run
again. Exit codes are those of `pev run`.";

pub(crate) const DOCTOR_HELP: &str = "\
Examples:
  pev doctor
  pev doctor --workspace site --json
  pev doctor --ping                  # sends each role a one-token request

Configuration: WORKSPACE/pev.toml, then $XDG_CONFIG_HOME/pev/pev.toml (or
~/.config/pev/pev.toml), under the environment: PEV_PROVIDER, PEV_<ROLE>_PROVIDER,
PEV_<ROLE>_MODEL (ROLE: PLANNER, EXECUTOR, VERIFIER), ANTHROPIC_BASE_URL, OPENAI_BASE_URL.
Keys come from ANTHROPIC_API_KEY, OPENAI_API_KEY or the variable api_key_env names; their
values are never printed.

Exit codes:
  0  every role can build its client (and answered, with --ping)
  1  some role cannot (the reason is shown per role)
  2  a pev.toml cannot be read or parsed (file:line:column), a bad environment variable or
     workspace";

pub(crate) const EVAL_HELP: &str = "\
Examples:
  pev eval evals
  pev eval evals --gate on --json | jq '.totals'
  pev eval evals --keep          # keep each run's workspace copy (pev show last -w COPY)
  pev eval evals --jobs 4        # four scenarios at a time
  pev eval evals --shard 2/3 --json > shard-2.json   # one CI runner's share
  pev eval merge shard-*.json    # the shards as one table (--json: one document)

A suite is a directory of scenarios: SCENARIO/scenario.toml (goal, mode, expect), its fixture
SCENARIO/workspace/ and its scripted models (see evals/README.md).

Exit codes:
  0  every gate-on run ended as expected
  1  some gate-on run did not, or a run left no result
  2  a bad suite (the file and field are named)";

pub(crate) const MCP_HELP: &str = "\
Use pev from Claude Code (in the project directory):
  pev integrate claude          # .mcp.json + .claude/settings.json (hooks run `pev gate`)
  claude                        # plan_create, step_update, … are offered; stops are checked
  pev show last                 # what the session did, and the verdict

Use pev from Codex:
  pev integrate codex --user    # [mcp_servers.pev] in ~/.codex/config.toml + hooks.json
  codex                         # then /hooks to trust pev's hooks (Codex skips them until then)

Any MCP client: run `pev mcp` as a stdio server in the workspace. The journal is
WORKSPACE/.pev/pev.db (`--store` to put it elsewhere).";

pub(crate) const GATE_HELP: &str = "\
Wire it as the client's Stop, SubagentStop, SessionStart and PostToolUse hook (pev integrate
does). It reads the hook's JSON on stdin and answers on stdout:
  allowed   {\"systemMessage\": \"pev: run … verified …\"}
  refused   {\"decision\": \"block\", \"reason\": \"what is unfinished or failing\"}
  at the cap {\"continue\": false, \"stopReason\": \"…\"}  (the run is recorded partial or failed)
It fails closed: unreadable input or journal refuses the stop (under the same cap).

Examples:
  echo '{\"hook_event_name\":\"Stop\",\"session_id\":\"abc\",\"cwd\":\".\"}' | pev gate
  pev gate --from-transcript          # no pev plan: the client's own todo list must be done
  pev gate status --session abc       # the run's result as JSON (exit 0 / 3 / 1)

Exit codes: gate: 0 (the answer is the JSON); status: 0 success, 3 partial, 1 failed or no run.";

pub(crate) const INTEGRATE_HELP: &str = "\
Examples:
  pev integrate claude                    # this project: .mcp.json, .claude/settings.json
  pev integrate claude --user             # ~/.claude/settings.json (and the `claude mcp add` line)
  pev integrate claude --plugin pev-plugin   # a plugin dir for `claude --plugin-dir pev-plugin`
  pev integrate codex --user              # ~/.codex/config.toml and ~/.codex/hooks.json
  pev integrate codex --print             # show what would be written, write nothing

Existing files are merged (other servers, hooks and settings are kept); a file that is not valid
JSON is left alone and reported.";

pub(crate) const REPORT_HELP: &str = "\
Examples:
  pev report last                       # pev-report-<run>.html in this directory
  pev report last -o run.html -w site
  pev report 2026112 -o - > run.html

The file needs nothing else (no network, no scripts; a Content Security Policy forbids them) and
opens from disk. Everything that comes from a plan, a model, a tool or a file is escaped.

Exit codes: 0 written, 1 the journal's hash chain is broken (the report says so first) or the file
cannot be written, 2 no journal or no such run.";

pub(crate) const REPLAY_HELP: &str = "\
Examples:
  pev replay last                      # after changing a prompt, a model setting or pev itself
  pev replay 20261125-2 --policy policy.yaml

The run's workspace is copied to a scratch directory and every file the run changed is put back
as it was before it (from the journal), so the tools run for real and the verdict is computed
again by this pev. Each model request must equal the recorded one at its place (role, step,
attempt, turn); the first that does not is named with the message that differs, and the model
is then treated as having stopped answering. Nothing is sent to a model and nothing is paid.

Exit codes: 0 every request matched and the outcome is the recorded one, 1 a divergence or a
different outcome, 2 bad input (no such run, not an agent run, recorded before conversations
were kept).";

pub(crate) const EXPORT_HELP: &str = "\
Examples:
  pev export last --otlp http://localhost:4318           # a local Jaeger or Phoenix
  pev export 20261125-1 20261125-2 --otlp https://otel.example.com --capture-content
  OTEL_EXPORTER_OTLP_HEADERS='api_key=…' pev export last  # endpoint from OTEL_EXPORTER_OTLP_ENDPOINT

Each run is one trace whose id is derived from the run id, so exporting a run again gives the same
trace. The spans follow the OpenTelemetry GenAI semantic conventions: invoke_agent pev (the run),
plan, step, chat MODEL, execute_tool TOOL, verify (assertions and the judge as
gen_ai.evaluation.result events). Content stays out unless --capture-content or
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. `pev run` and `pev agent` send the same
spans live when OTEL_EXPORTER_OTLP_ENDPOINT (or [telemetry] in ~/.config/pev/pev.toml) is set.

Exit codes: 0 sent, 1 the endpoint refused or could not be reached, 2 bad input (no such run, bad
URL, no endpoint).";

pub(crate) const SCHEMA_HELP: &str = "\
Examples:
  pev schema plan > plan.schema.json
  pev schema lint | jq '.properties | keys'";
