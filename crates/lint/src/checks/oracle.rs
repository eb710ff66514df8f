//! `ORACLE_WRITE`: a step whose tool writes a test (what pev infers by the ecosystems'
//! conventions, `pev_protocol::oracle::convention`, or what the plan's `oracle.protect` names)
//! without `may_change_oracle`. pev refuses such a write when the plan runs; lint says so before,
//! and so says which files it takes for the plan's checks. Only literal paths are judged (a path
//! from a reference is known when the step runs).

use pev_protocol::ValueRef;
use pev_protocol::{Finding, LintCode, Step};

use crate::Ctx;

/// How the engine matches oracle globs (`pev_verify::oracle`): `*` crosses `/`.
const GLOB: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

/// The built-in tools that write the file their `path` names.
const WRITERS: &[&str] = &["file.write", "file.patch"];

/// The check as one step at a time, for the pass that runs several checks over each step.
pub(crate) struct Pass {
    /// The plan's `oracle.protect` globs that compile, as written (trimmed) and compiled.
    protect: Vec<(String, glob::Pattern)>,
}

impl Pass {
    /// Compiles the plan's oracle globs; a bad one is a finding, before any step's.
    pub(crate) fn new(ctx: &Ctx<'_>, out: &mut Vec<Finding>) -> Self {
        let mut protect = Vec::new();
        if let Some(oracle) = &ctx.plan.oracle {
            for (field, globs) in [("protect", &oracle.protect), ("allow", &oracle.allow)] {
                for (i, g) in globs.iter().enumerate() {
                    let g = g.trim().trim_start_matches("./");
                    match glob::Pattern::new(g) {
                        Ok(p) if field == "protect" => protect.push((g.to_owned(), p)),
                        Ok(_) => {}
                        Err(e) => out.push(Finding::plan(
                            LintCode::SchemaInvalid,
                            format!("/oracle/{field}/{i}"),
                            format!("oracle.{field}: `{g}` is not a valid glob: {e}"),
                        )),
                    }
                }
            }
        }
        Self { protect }
    }

    pub(crate) fn step(&self, i: usize, step: &Step, out: &mut Vec<Finding>) {
        if step.may_change_oracle || !step.tool.as_deref().is_some_and(|t| WRITERS.contains(&t)) {
            return;
        }
        let Some(ValueRef::String(path)) = step.parameters.get("path") else { return };
        if path.contains("${") || path.contains("{{") {
            return;
        }
        let rel = path.trim_start_matches("./");
        let why = match self.protect.iter().find(|(_, p)| p.matches_with(rel, GLOB)) {
            Some((glob, _)) => format!("the plan's oracle.protect names it (`{glob}`)"),
            None => match pev_protocol::oracle::convention(rel) {
                Some(why) => why.to_owned(),
                None => return,
            },
        };
        out.push(Finding::step(
            LintCode::OracleWrite,
            (i, step.id.as_str()),
            format!("/steps/{i}/parameters/path"),
            format!(
                "step `{}` writes {rel}, which the run is checked by ({why}); pev will refuse \
                 the write unless the step sets may_change_oracle (fix the code under test \
                 instead, or say the step's work is the tests)",
                step.id
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use pev_protocol::LintCode;

    fn codes(plan: &str) -> Vec<(LintCode, Option<usize>, String)> {
        let parsed =
            pev_protocol::parse::parse_plan(plan, pev_protocol::Format::Json).expect("parses");
        let policy = crate::policy::CompiledPolicy::default();
        let result = crate::lint(&parsed, &policy, crate::LintOptions::default());
        result
            .errors
            .iter()
            .chain(&result.warnings)
            .filter(|f| f.code == LintCode::OracleWrite)
            .map(|f| (f.code, f.step, f.path.clone()))
            .collect()
    }

    #[test]
    fn a_write_to_a_test_without_leave_is_a_warning_and_with_leave_is_not() {
        let plan = r#"{"goal": "g", "oracle": {"protect": ["docs/spec.md"]}, "steps": [
            {"id": "a", "tool": "file.write", "parameters": {"path": "./tests/test_x.py", "content": "x"}},
            {"id": "b", "tool": "file.patch", "parameters": {"path": "src/x.py", "edits": []}},
            {"id": "c", "tool": "file.write", "may_change_oracle": true, "parameters": {"path": "tests/test_y.py", "content": "x"}},
            {"id": "d", "tool": "file.write", "parameters": {"path": "docs/spec.md", "content": "x"}},
            {"id": "e", "tool": "file.read", "parameters": {"path": "tests/test_x.py"}},
            {"id": "f", "tool": "file.write", "parameters": {"path": "${a.result.path}", "content": "x"}}
        ]}"#;
        let found = codes(plan);
        let at: Vec<Option<usize>> = found.iter().map(|f| f.1).collect();
        assert_eq!(at, [Some(0), Some(3)], "{found:?}");
        assert_eq!(found[0].2, "/steps/0/parameters/path");
    }

    #[test]
    fn a_bad_oracle_glob_is_schema_invalid_and_classes_match_as_the_engine_matches() {
        let plan = r#"{"goal": "g", "oracle": {"protect": ["golden/[ab].txt", "["]}, "steps": [
            {"id": "a", "tool": "file.write", "parameters": {"path": "golden/a.txt", "content": "x"}},
            {"id": "b", "tool": "file.write", "parameters": {"path": "golden/c.txt", "content": "x"}}
        ]}"#;
        let parsed =
            pev_protocol::parse::parse_plan(plan, pev_protocol::Format::Json).expect("parses");
        let policy = crate::policy::CompiledPolicy::default();
        let result = crate::lint(&parsed, &policy, crate::LintOptions::default());
        let bad: Vec<&str> = result
            .errors
            .iter()
            .filter(|f| f.code == LintCode::SchemaInvalid)
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(bad, ["/oracle/protect/1"]);
        let at: Vec<Option<usize>> = codes(plan).iter().map(|f| f.1).collect();
        assert_eq!(at, [Some(0)]);
    }
}
