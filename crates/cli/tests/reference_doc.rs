//! `docs/reference.md` is the user-facing reference of pev's documents and numbers. This test
//! keeps it true: every name the binary and the types define (plan and step fields, assertion
//! types and their fields, tool names, arguments and outputs, run result fields, reason codes,
//! statuses, events, lint codes with their level and severity, policy keys, exit codes) must
//! appear in the section that documents it, pev's extensions must be marked as such, the
//! section anchors that citations point at must exist, and nothing the binary prints may cite a
//! document that is not in the repository.
//!
//! The names come from the binary (`pev schema KIND`, `pev lint --explain all`, the `Exit codes:`
//! of `--help`, the outputs of a real run) or from the types themselves, so a new field, code or
//! tool fails this test until the reference documents it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

// `cfg(test)` puts the helpers under clippy.toml's allow-*-in-tests, as the tests are.
#[cfg(test)]
mod reference_doc {
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::path::PathBuf;

    use pev_protocol::EventBody;
    use serde_json::{Value, json};

    /// The marker the reference puts beside everything beyond the original contract.
    const EXTENSION: &str = "pev extension";

    /// The section headings citations point at (`docs/reference.md#4-run-result`).
    const SECTIONS: &[(&str, &str)] = &[
        ("## 1. Plan format", "1-plan-format"),
        ("## 2. Assertions", "2-assertions"),
        ("## 3. Tools", "3-tools"),
        ("## 4. Run result", "4-run-result"),
        ("## 5. Lint result", "5-lint-result"),
        ("## 6. Policy", "6-policy"),
        ("## 7. Exit codes", "7-exit-codes"),
    ];

    fn repo_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn doc() -> String {
        let path = repo_root().join("docs/reference.md");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The text of the section under `heading`, up to the next `## ` heading.
    fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
        let start = doc
            .lines()
            .scan(0, |offset, line| {
                let at = *offset;
                *offset += line.len() + 1;
                Some((at, line))
            })
            .find(|(_, line)| *line == heading)
            .map(|(at, _)| at)
            .unwrap_or_else(|| panic!("docs/reference.md has no heading `{heading}`"));
        let body = &doc[start + heading.len()..];
        let end = body.find("\n## ").unwrap_or(body.len());
        &body[..end]
    }

    /// `pev ARGS`: exit code and stdout.
    fn pev(args: &[&str]) -> (i32, String) {
        let output = assert_cmd::cargo::cargo_bin_cmd!("pev")
            .env_remove("PEV_MAX_INPUT_BYTES")
            .env("NO_COLOR", "1")
            .args(args)
            .output()
            .expect("the binary runs");
        let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
        (output.status.code().expect("exited normally"), stdout)
    }

    fn schema(kind: &str) -> Value {
        let (code, stdout) = pev(&["schema", kind]);
        assert_eq!(code, 0, "pev schema {kind}");
        serde_json::from_str(&stdout).expect("the schema is JSON")
    }

    /// The property names of an object schema, through `oneOf`/`anyOf`/`allOf`.
    fn properties(schema: &Value, out: &mut BTreeSet<String>) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            out.extend(props.keys().cloned());
        }
        for key in ["oneOf", "anyOf", "allOf"] {
            for sub in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
                properties(sub, out);
            }
        }
    }

    /// The string values an enum schema allows (`enum` lists and `const`s in its variants).
    fn values(schema: &Value) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut stack = vec![schema];
        while let Some(s) = stack.pop() {
            for v in s.get("enum").and_then(Value::as_array).into_iter().flatten() {
                out.extend(v.as_str().map(str::to_owned));
            }
            out.extend(s.get("const").and_then(Value::as_str).map(str::to_owned));
            for key in ["oneOf", "anyOf"] {
                stack.extend(s.get(key).and_then(Value::as_array).into_iter().flatten());
            }
        }
        out
    }

    fn def<'a>(schema: &'a Value, name: &str) -> &'a Value {
        schema
            .pointer(&format!("/$defs/{name}"))
            .unwrap_or_else(|| panic!("the schema has no $defs/{name}"))
    }

    /// The table row of a section whose first cell is `` `name` ``.
    fn row<'a>(text: &'a str, name: &str) -> Option<&'a str> {
        let start = format!("| `{name}` |");
        text.lines().find(|line| line.starts_with(&start))
    }

    /// `` `name` ``, or `` `name?` `` (the reference's way of saying optional).
    fn mentions(text: &str, name: &str) -> bool {
        text.contains(&format!("`{name}`")) || text.contains(&format!("`{name}?`"))
    }

    /// Fails listing every `(what, name)` pair the reference is missing.
    fn assert_none_missing(what: &str, missing: &[String]) {
        assert!(
            missing.is_empty(),
            "docs/reference.md does not document these {what} (add them to the section named):\n  {}",
            missing.join("\n  ")
        );
    }

    /// The units a marker applies to: each table row, each list item and each other paragraph
    /// (whitespace normalised, so a marker broken across lines still counts).
    fn units(text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut current: Vec<&str> = Vec::new();
        for line in text.lines().chain(std::iter::once("")) {
            let trimmed = line.trim_start();
            let row = trimmed.starts_with('|');
            if (trimmed.is_empty() || row || trimmed.starts_with("- ")) && !current.is_empty() {
                out.push(current.join(" ").split_whitespace().collect::<Vec<_>>().join(" "));
                current.clear();
            }
            if row {
                out.push(line.to_owned());
            } else if !trimmed.is_empty() {
                current.push(line);
            }
        }
        out
    }

    /// Each needle must appear in at least one unit of `text` that carries the extension marker.
    fn assert_marked(section_name: &str, text: &str, needles: &[&str]) {
        let units = units(text);
        let unmarked: Vec<String> = needles
            .iter()
            .filter(|needle| !units.iter().any(|u| u.contains(*needle) && u.contains(EXTENSION)))
            .map(|needle| format!("{section_name}: {needle}"))
            .collect();
        assert!(
            unmarked.is_empty(),
            "docs/reference.md does not mark these as a `{EXTENSION}`:\n  {}",
            unmarked.join("\n  ")
        );
    }

    /// A heading's anchor as GitHub makes it.
    fn slug(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn sections_have_stable_anchors_and_links_resolve() {
        let doc = doc();
        let anchors: BTreeSet<String> = doc
            .lines()
            .filter(|l| l.starts_with("## ") || l.starts_with("### "))
            .map(|l| slug(l.trim_start_matches('#')))
            .collect();
        for (heading, anchor) in SECTIONS {
            assert!(doc.lines().any(|l| l == *heading), "no heading `{heading}`");
            assert!(anchors.contains(*anchor), "`{heading}` does not make the anchor #{anchor}");
        }
        let broken: Vec<&str> = doc
            .split("](#")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
            .filter(|anchor| !anchors.contains(*anchor))
            .collect();
        assert!(broken.is_empty(), "links to missing anchors: {broken:?}");
    }

    #[test]
    fn plan_fields_are_documented() {
        let doc = doc();
        let text = section(&doc, "## 1. Plan format");
        let plan = schema("plan");
        let mut missing = Vec::new();
        for (what, node) in [("plan", &plan), ("step", def(&plan, "Step"))] {
            let mut props = BTreeSet::new();
            properties(node, &mut props);
            for prop in props {
                if row(text, &prop).is_none() {
                    missing.push(format!("§1 {what} field `{prop}` (a table row)"));
                }
            }
        }
        let mut post = BTreeSet::new();
        properties(def(&plan, "Postcondition"), &mut post);
        for name in ["OnFail", "Complexity"] {
            post.extend(values(def(&plan, name)));
        }
        missing.extend(post.iter().filter(|v| !mentions(text, v)).map(|v| format!("§1 `{v}`")));
        assert_none_missing("plan fields", &missing);
    }

    #[test]
    fn every_assertion_type_and_field_is_documented() {
        let doc = doc();
        let text = section(&doc, "## 2. Assertions");
        let plan = schema("plan");
        let variants = def(&plan, "Assertion")["oneOf"].as_array().expect("Assertion is a oneOf");
        assert!(variants.len() >= 11, "fewer assertion types than expected: {}", variants.len());
        let mut missing = Vec::new();
        for variant in variants {
            let kind = variant.pointer("/properties/type/const").and_then(Value::as_str);
            let kind = kind.expect("each assertion variant has a `type` const");
            let Some(line) = row(text, kind) else {
                missing.push(format!("§2 assertion type `{kind}` (a table row)"));
                continue;
            };
            let mut fields = BTreeSet::new();
            properties(variant, &mut fields);
            for field in fields.iter().filter(|f| !["type", "recovery"].contains(&f.as_str())) {
                if !mentions(line, field) {
                    missing.push(format!("§2 field `{field}` in the row of `{kind}`"));
                }
            }
        }
        for name in ["recovery", "assert", "http_200", "type", "passed", "detail"] {
            if !mentions(text, name) {
                missing.push(format!("§2 `{name}`"));
            }
        }
        assert_none_missing("assertions", &missing);
        assert_marked("§2", text, &["`repeatable`"]);
    }

    /// A local server that answers one HTTP request with 200 and a short body.
    fn serve_once() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("the port").port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut seen = Vec::new();
                let mut buf = [0u8; 1024];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\
                      connection: close\r\n\r\nok",
                );
            }
        });
        port
    }

    /// Runs a plan that calls every built-in tool once and returns each tool's output, and the
    /// `run.started` event.
    fn tool_outputs() -> (BTreeMap<String, Value>, Value) {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = serve_once();
        let plan = json!({
            "goal": "Write a note and look at it",
            "steps": [
                {"id": "write", "tool": "file.write",
                 "parameters": {"path": "note.txt", "content": "hello\n"}},
                {"id": "patch", "tool": "file.patch", "depends_on": ["write"],
                 "parameters": {"path": "note.txt", "edits": [{"old": "hello", "new": "bye"}]}},
                {"id": "read", "tool": "file.read", "depends_on": ["patch"],
                 "parameters": {"path": "note.txt"}},
                {"id": "list", "tool": "file.list", "depends_on": ["patch"],
                 "parameters": {"path": "."}},
                {"id": "exec", "tool": "shell.exec", "depends_on": ["patch"],
                 "parameters": {"command": "cat note.txt"}},
                {"id": "fetch", "tool": "http.request",
                 "parameters": {"method": "GET", "url": format!("http://127.0.0.1:{port}/")}}
            ]
        });
        let plan_path = dir.path().join("plan.json");
        std::fs::write(&plan_path, plan.to_string()).expect("write the plan");
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).expect("workspace");
        let (_, stdout) = pev(&[
            "run",
            plan_path.to_str().expect("UTF-8 path"),
            "--workspace",
            workspace.to_str().expect("UTF-8 path"),
            "--json",
        ]);
        let mut outputs = BTreeMap::new();
        let mut started = Value::Null;
        for line in stdout.lines() {
            let event: Value = serde_json::from_str(line).expect("each line is JSON");
            match event["event"].as_str() {
                Some("run.started") => started = event,
                Some("tool.finished") => {
                    let tool = event["tool"].as_str().expect("tool").to_owned();
                    assert_eq!(event["ok"], true, "{tool} failed: {event}");
                    outputs.insert(tool, event["output"].clone());
                }
                _ => {}
            }
        }
        (outputs, started)
    }

    #[test]
    fn every_builtin_tool_with_its_arguments_and_outputs_is_documented() {
        let doc = doc();
        let text = section(&doc, "## 3. Tools");
        let registry = pev_tools::Registry::builtin();
        let definitions = registry.definitions();
        let builtin: BTreeSet<&str> =
            pev_protocol::tool::BUILTIN_TOOLS.iter().map(|(name, _)| *name).collect();
        let registered: BTreeSet<&str> = definitions.iter().map(|d| d.name).collect();
        assert_eq!(builtin, registered, "the protocol's table and the registry disagree");
        let (outputs, _) = tool_outputs();
        let mut missing = Vec::new();
        for tool in &definitions {
            let Some(line) = row(text, tool.name) else {
                missing.push(format!("§3 tool `{}` (a table row)", tool.name));
                continue;
            };
            let effect = serde_json::to_value(tool.effect).expect("effect");
            let effect = effect.as_str().expect("an effect is a string");
            if !line.contains(&format!("| {effect} |")) {
                missing.push(format!("§3 effect `{effect}` in the row of `{}`", tool.name));
            }
            let mut args = BTreeSet::new();
            properties(&tool.parameters, &mut args);
            let edits = tool.parameters.pointer("/properties/edits/items");
            edits.into_iter().for_each(|items| properties(items, &mut args));
            let output = outputs.get(tool.name);
            let output = output.unwrap_or_else(|| panic!("the run did not call {}", tool.name));
            let mut fields: BTreeSet<String> =
                output.as_object().expect("an object").keys().cloned().collect();
            if let Some(entry) = output.pointer("/entries/0").and_then(Value::as_object) {
                fields.extend(entry.keys().cloned());
            }
            for name in args.iter().chain(&fields) {
                if !mentions(line, name) {
                    missing.push(format!("§3 `{name}` in the row of `{}`", tool.name));
                }
            }
        }
        assert_none_missing("tools", &missing);
        assert_marked("§3", text, &["`sandbox`"]);
    }

    /// Every event kind. The match has no wildcard, so a new kind does not compile until it is
    /// listed here (and then this test asks for it in the reference).
    fn event_name(event: &EventBody) -> &'static str {
        match event {
            EventBody::RunStarted { .. } => "run.started",
            EventBody::PlanCreated { .. } => "plan.created",
            EventBody::PlanRevised { .. } => "plan.revised",
            EventBody::DelegateStarted { .. } => "delegate.started",
            EventBody::DelegateFinished { .. } => "delegate.finished",
            EventBody::StepStarted { .. } => "step.started",
            EventBody::ApprovalRequested { .. } => "approval.requested",
            EventBody::ApprovalGranted { .. } => "approval.granted",
            EventBody::ToolCalled { .. } => "tool.called",
            EventBody::ToolFinished { .. } => "tool.finished",
            EventBody::AssertionChecked { .. } => "assertion.checked",
            EventBody::StepFinished { .. } => "step.finished",
            EventBody::Warning { .. } => "warning",
            EventBody::Usage { .. } => "usage",
            EventBody::VerifyFinished { .. } => "verify.finished",
            EventBody::RunFinished { .. } => "run.finished",
            EventBody::WorkspaceSnapshot { .. } => "workspace.snapshot",
            EventBody::OracleRecorded { .. } => "oracle.recorded",
            EventBody::ClientPlanCall { .. } => "client.plan_call",
            EventBody::ClientTool { .. } => "client.tool",
            EventBody::GateDecided { .. } => "gate.decided",
            EventBody::JudgeDecided { .. } => "judge.decided",
        }
    }

    #[test]
    fn run_result_reason_codes_statuses_and_events_are_documented() {
        let doc = doc();
        let text = section(&doc, "## 4. Run result");
        let result = schema("result");
        let mut fields = BTreeSet::new();
        properties(&result, &mut fields);
        let defs = result["$defs"].as_object().expect("$defs");
        for node in defs.values() {
            properties(node, &mut fields);
        }
        let mut missing: Vec<String> = fields
            .iter()
            .filter(|f| !mentions(text, f))
            .map(|f| format!("§4 result field `{f}`"))
            .collect();
        for name in ["RunStatus", "StepStatus"] {
            let vals = values(def(&result, name));
            missing.extend(vals.iter().filter(|v| !mentions(text, v)).map(|v| format!("§4 `{v}`")));
        }
        let reasons = values(def(&result, "ReasonCode"));
        assert!(reasons.len() >= 13, "fewer reason codes than expected: {reasons:?}");
        for code in &reasons {
            if row(text, code).is_none() {
                missing.push(format!("§4 reason code `{code}` (a table row)"));
            }
        }
        let sample = EventBody::PlanCreated { version: 1, steps: 0 };
        assert_eq!(event_name(&sample), sample.name());
        let events = [
            "run.started",
            "plan.created",
            "plan.revised",
            "step.started",
            "approval.requested",
            "approval.granted",
            "tool.called",
            "tool.finished",
            "assertion.checked",
            "judge.decided",
            "delegate.started",
            "delegate.finished",
            "step.finished",
            "warning",
            "usage",
            "verify.finished",
            "run.finished",
        ];
        for event in events {
            if row(text, event).is_none() {
                missing.push(format!("§4 event `{event}` (a table row)"));
            }
        }
        let (_, started) = tool_outputs();
        let sandbox = started["sandbox"].as_object().expect("run.started has a sandbox");
        missing.extend(
            sandbox
                .keys()
                .filter(|k| !mentions(text, k))
                .map(|k| format!("§4 run.started sandbox field `{k}`")),
        );
        assert_none_missing("run result names", &missing);
        assert_marked(
            "§4",
            text,
            &[
                "`evidence_regressed`",
                "`plan_execution_mismatch`",
                "`final_check`",
                "`judge`",
                "`cache_read_tokens`",
                "`cache_write_tokens`",
                "`cache_saved_usd`",
                "`sandbox`",
                "\"event\": \"error\"",
                "hash",
            ],
        );
    }

    #[test]
    fn every_lint_code_with_its_level_and_severity_is_documented() {
        let doc = doc();
        let text = section(&doc, "## 5. Lint result");
        let (code, explained) = pev(&["lint", "--explain", "all"]);
        assert_eq!(code, 0);
        // `CODE: error, high severity`
        let codes: Vec<(&str, &str, &str)> = explained
            .lines()
            .filter_map(|line| {
                let (name, rest) = line.split_once(": ")?;
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
                    return None;
                }
                let (level, severity) = rest.strip_suffix(" severity")?.split_once(", ")?;
                Some((name, level, severity))
            })
            .collect();
        assert_eq!(codes.len(), pev_protocol::LintCode::ALL.len(), "{explained}");
        let mut missing = Vec::new();
        for (name, level, severity) in &codes {
            match row(text, name) {
                None => missing.push(format!("§5 lint code `{name}` (a table row)")),
                Some(line) => {
                    if !line.contains(&format!("| {level} | {severity} |")) {
                        missing.push(format!("§5 `{name}`: `| {level} | {severity} |`"));
                    }
                }
            }
        }
        let lint = schema("lint");
        let mut names = BTreeSet::new();
        properties(&lint, &mut names);
        properties(def(&lint, "Finding"), &mut names);
        names.extend(values(def(&lint, "LintStatus")));
        names.extend(values(def(&lint, "Severity")));
        missing.extend(names.iter().filter(|n| !mentions(text, n)).map(|n| format!("§5 `{n}`")));
        assert_none_missing("lint names", &missing);
        assert_marked("§5", text, &["`COMMAND_CHAINED`", "`DOWNLOAD_EXECUTE`"]);
    }

    #[test]
    fn every_policy_key_is_documented() {
        let doc = doc();
        let text = section(&doc, "## 6. Policy");
        let policy = schema("policy");
        let mut keys = BTreeSet::new();
        properties(&policy, &mut keys);
        assert!(keys.len() >= 19, "fewer policy keys than expected: {keys:?}");
        let mut missing: Vec<String> = keys
            .iter()
            .filter(|k| row(text, k).is_none())
            .map(|k| format!("§6 policy key `{k}` (a table row)"))
            .collect();
        for name in ["LevelOverride", "SandboxMode", "SandboxNetwork"] {
            let vals = values(def(&policy, name));
            missing.extend(vals.iter().filter(|v| !mentions(text, v)).map(|v| format!("§6 `{v}`")));
        }
        assert_none_missing("policy keys", &missing);
        assert_marked(
            "§6",
            text,
            &[
                "`sandbox`",
                "`sandbox_ports`",
                "`sandbox_network`",
                "`sandbox_max_file_bytes`",
                "`sandbox_max_processes`",
            ],
        );
    }

    /// The codes listed under `Exit codes:` in a help text.
    fn exit_codes_in_help(args: &[&str]) -> BTreeSet<u32> {
        let (code, help) = pev(args);
        assert_eq!(code, 0, "pev {args:?}");
        let (_, tail) = help.split_once("Exit codes:").unwrap_or_else(|| {
            panic!("`pev {}` lists no exit codes", args.join(" "));
        });
        tail.lines()
            .skip(1)
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }

    #[test]
    fn every_exit_code_is_documented() {
        let doc = doc();
        let text = section(&doc, "## 7. Exit codes");
        let mut codes = BTreeSet::from([130]); // a second Ctrl-C, or Ctrl-C while planning
        for args in [
            &["--help"][..],
            &["run", "--help"],
            &["lint", "--help"],
            &["doctor", "--help"],
            &["eval", "--help"],
        ] {
            codes.extend(exit_codes_in_help(args));
        }
        assert!(codes.is_superset(&BTreeSet::from([0, 1, 2, 3, 4, 130])), "{codes:?}");
        let missing: Vec<String> = codes
            .iter()
            .filter(|c| row(text, &c.to_string()).is_none())
            .map(|c| format!("§7 exit code `{c}` (a table row)"))
            .collect();
        assert_none_missing("exit codes", &missing);
        assert_marked("§7", text, &["hash chain"]);
    }

    #[test]
    fn nothing_users_see_cites_a_document_outside_the_repository() {
        let mut outputs = Vec::new();
        for kind in ["plan", "lint", "policy", "result"] {
            outputs.push((format!("pev schema {kind}"), pev(&["schema", kind]).1));
        }
        outputs.push(("pev lint --explain all".into(), pev(&["lint", "--explain", "all"]).1));
        outputs.push(("pev --help".into(), pev(&["--help"]).1));
        for command in [
            "lint", "run", "agent", "resume", "runs", "show", "approve", "schema", "doctor", "eval",
        ] {
            outputs.push((format!("pev {command} --help"), pev(&[command, "--help"]).1));
        }
        let readme = repo_root().join("README.md");
        outputs.push(("README.md".into(), std::fs::read_to_string(readme).expect("README")));
        let citing: Vec<&str> = outputs
            .iter()
            .filter(|(_, text)| text.contains("CONTRACTS"))
            .map(|(what, _)| what.as_str())
            .collect();
        assert!(
            citing.is_empty(),
            "these cite CONTRACTS.md, which is not in the repository; cite docs/reference.md: \
             {citing:?}"
        );
    }
}
