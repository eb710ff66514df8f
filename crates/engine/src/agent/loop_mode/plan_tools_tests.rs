//! Tests of the plan tools' vocabulary: the schemas the model is sent and the rendered plan.

use serde_json::json;

use super::*;

fn step(id: &str, title: &str, status: StepStatus) -> ModelStep {
    ModelStep {
        id: id.into(),
        title: title.into(),
        status,
        evidence: None,
        blocked_reason: None,
        assertions: Vec::new(),
    }
}

fn post(id: &str, description: &str, verified_by: Option<VerifiedBy>) -> ModelPostcondition {
    ModelPostcondition {
        id: id.into(),
        description: description.into(),
        assertions: Vec::new(),
        verified: verified_by.is_some(),
        verified_by,
        evidence: verified_by.map(|_| "ran cargo test: 12 passed".to_owned()),
    }
}

#[test]
fn the_tools_are_offered_in_order_with_derived_schemas() {
    let specs = plan_tool_specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["plan_create", "plan_show", "step_update", "postcondition_verify"]);

    let create = &specs[0].input_schema;
    assert_eq!(create["type"], "object");
    assert_eq!(create["required"], json!(["objective", "steps"]));
    assert_eq!(create["additionalProperties"], false);
    let step = &create["properties"]["steps"]["items"];
    assert_eq!(step["required"], json!(["title"]));
    assert!(step["properties"]["id"].is_object());
    // The assertion schema is inlined: no references the model API could not resolve.
    let text = create.to_string();
    assert!(text.contains("\"file_contains\""), "{text}");
    assert!(text.contains("\"content_changed\""));
    assert!(!text.contains("$ref"));
    assert!(!text.contains("$schema"));
    let dropped = &create["properties"]["dropped"]["items"];
    assert_eq!(dropped["required"], json!(["id", "reason"]));

    let update = &specs[2].input_schema;
    assert_eq!(update["required"], json!(["id", "status"]));
    assert_eq!(
        update["properties"]["status"]["enum"],
        json!(["pending", "in_progress", "done", "blocked"])
    );
    let verify = &specs[3].input_schema;
    assert_eq!(verify["required"], json!(["id", "evidence"]));
    assert_eq!(specs[1].input_schema["type"], "object");
}

#[test]
fn the_plan_renders_every_status_and_postcondition_state() {
    let mut done = step("read", "Read the file", StepStatus::Done);
    done.evidence = Some("read site/style.css:\nbody is white".into());
    let mut blocked = step("deploy", "Deploy", StepStatus::Blocked);
    blocked.blocked_reason = Some("no credentials".into());
    let mut test = step("test", "Run the tests", StepStatus::Pending);
    test.assertions = vec![
        Assertion::CommandSucceeds {
            command: "cargo test".into(),
            timeout_s: None,
            repeatable: true,
            recovery: None,
        },
        Assertion::ContentChanged { path: "a".into(), recovery: None },
    ];
    let plan = ModelPlan {
        objective: "Make the site green".into(),
        steps: vec![done, step("patch", "Patch it", StepStatus::InProgress), test, blocked],
        postconditions: vec![
            post("p1", "Tests pass", Some(VerifiedBy::Harness)),
            post("p2", "Docs updated", Some(VerifiedBy::Claim)),
            post("p3", "Page is green", None),
        ],
    };
    assert_eq!(
        render_plan(&plan),
        "Objective: Make the site green\n\
         Steps:\n\
         [x] 1. read: Read the file — read site/style.css: body is white\n\
         [~] 2. patch: Patch it (in progress)\n\
         [ ] 3. test: Run the tests [checks: command_succeeds, content_changed]\n\
         [!] 4. deploy: Deploy — blocked: no credentials\n\
         Postconditions:\n\
         [✓] p1. Tests pass — ran cargo test: 12 passed (checked by the harness)\n\
         [✓] p2. Docs updated — ran cargo test: 12 passed (claimed, not checked)\n\
         [✗] p3. Page is green — not verified\n"
    );
}

#[test]
fn a_plan_without_postconditions_has_no_postcondition_section() {
    let plan = ModelPlan {
        objective: "o".into(),
        steps: vec![step("a", "A", StepStatus::Pending)],
        postconditions: Vec::new(),
    };
    assert_eq!(render_plan(&plan), "Objective: o\nSteps:\n[ ] 1. a: A\n");
}

#[test]
fn long_evidence_is_clipped_on_a_char_boundary() {
    assert_eq!(clip("  short\nline  ", 200), "short line");
    let long = "é".repeat(300);
    let clipped = clip(&long, 200);
    assert_eq!(clipped.chars().count(), 201);
    assert!(clipped.ends_with("é…"));
}

#[test]
fn postcondition_refs_take_a_number_or_a_string() {
    let by_number: PostconditionVerifyArgs =
        serde_json::from_value(json!({"id": 2, "evidence": "x"})).unwrap();
    assert_eq!(by_number.id, PostconditionRef::Index(2));
    let by_id: PostconditionVerifyArgs =
        serde_json::from_value(json!({"id": "p1", "evidence": "x"})).unwrap();
    assert_eq!(by_id.id, PostconditionRef::Id("p1".into()));
}
