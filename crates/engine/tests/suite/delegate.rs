//! Delegated steps (issue 17) with scripted models: each child run is planned by the planner
//! role and verified by the harness like any run, in the parent's journal, and the parent step
//! holds to the child's verdict, never its word. The models are routed by content (each child's
//! goal carries a tag), so children running in parallel get their own turns whatever order
//! they ask in.

use std::sync::Arc;
use std::time::Duration;

use pev_engine::agent::budget::{Budget, BudgetState, BudgetedClient};
use pev_engine::agent::call_log::{CallLog, LoggedClient};
use pev_engine::agent::delegate::{ChildRuns, RoleClient, Roles};
use pev_engine::agent::executor::{ExecutorOptions, ModelExecutor};
use pev_engine::agent::judge::{JudgeOptions, ModelJudge};
use pev_engine::agent::planner::{Planner, PlannerOptions};
use pev_engine::agent::run::AgentLoop;
use pev_engine::{Engine, ModelHooks, ResumeInput};
use pev_lint::CompiledPolicy;
use pev_protocol::event::EventBody;
use pev_protocol::run::{ReasonCode, RunResult, RunStatus, StepStatus};
use pev_providers::cost::PriceTable;
use pev_providers::script::{ScriptTurn, ScriptedClient};
use pev_providers::{
    BoxFuture, ChatRequest, ChatResponse, ContentBlock, ModelClient, ProviderError, StreamSink,
};
use pev_store::{Journal, Store};
use serde_json::{Value, json};

use super::support::{Harness, config, step};

/// A model that answers each request from the script whose tag the request mentions (the
/// first tag found in its system prompt or messages), so that concurrent children get their own turns.
struct Router {
    routes: Vec<(String, Arc<ScriptedClient>)>,
}

impl Router {
    fn new(routes: Vec<(&str, Vec<ScriptTurn>)>) -> Arc<Self> {
        let routes = routes
            .into_iter()
            .map(|(tag, turns)| (tag.to_owned(), Arc::new(ScriptedClient::from_turns(tag, turns))))
            .collect();
        Arc::new(Self { routes })
    }

    fn route(&self, request: &ChatRequest) -> Result<&Arc<ScriptedClient>, ProviderError> {
        let text = format!(
            "{}{}",
            request.system.as_deref().unwrap_or_default(),
            serde_json::to_string(&request.messages).unwrap_or_default()
        );
        self.routes.iter().find(|(tag, _)| text.contains(tag.as_str())).map(|(_, c)| c).ok_or_else(
            || ProviderError::Malformed {
                provider: "script".into(),
                message: format!("no route for request: {}", &text[..text.len().min(300)]),
            },
        )
    }

    /// Turns left unanswered in the script of `tag`.
    fn left(&self, tag: &str) -> usize {
        self.routes.iter().find(|(t, _)| t == tag).map_or(0, |(_, c)| c.remaining())
    }
}

impl ModelClient for Router {
    fn provider(&self) -> &str {
        "script"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.route(request)?.chat(request).await })
    }

    fn chat_stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        sink: StreamSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.route(request)?.chat_stream(request, sink).await })
    }
}

/// A planner turn answering `plan`.
fn plan_turn(plan: &Value) -> ScriptTurn {
    ScriptTurn::text(plan.to_string())
}

/// A child plan that writes `path` with `content` (checked) after sleeping `ms` in `test.sleep`
/// under `key`.
fn write_plan(path: &str, content: &str, (key, ms): (&str, u64)) -> Value {
    json!({
        "goal": "child",
        "steps": [
            {"id": "wait", "tool": "test.sleep", "parameters": {"key": key, "ms": ms}},
            {"id": "write", "tool": "file.write", "depends_on": ["wait"],
             "parameters": {"path": path, "content": content},
             "assertions": [{"type": "file_contains", "path": path, "pattern": content}]}
        ],
        "postconditions": [{"description": "written",
            "assertions": [{"type": "file_contains", "path": path, "pattern": content}]}]
    })
}

/// What a test run is made of.
struct Setup {
    planner: Arc<Router>,
    executor: Arc<Router>,
    budget: Budget,
    jobs: usize,
    /// The tools the children may use (empty: all).
    allowed: Vec<String>,
    /// Replans a child may make.
    replans: u32,
}

impl Setup {
    fn new(planner: Arc<Router>, executor: Arc<Router>) -> Self {
        Self {
            planner,
            executor,
            budget: Budget::default(),
            jobs: 2,
            allowed: Vec::new(),
            replans: 0,
        }
    }
}

/// The engine of a parent run whose delegated steps run as child runs, and the log its model
/// calls go to (attached to `run_id`).
fn engine(h: &Harness, setup: &Setup, run_id: &str) -> (Engine, Arc<CallLog>, Arc<BudgetState>) {
    let calls = CallLog::new();
    calls.attach(&h.db, run_id).unwrap();
    let prices = PriceTable::built_in();
    let state = Arc::new(BudgetState::new(setup.budget, prices.clone()));
    let paid = |inner: Arc<dyn ModelClient>, role: &str| -> RoleClient {
        let logged = Arc::new(LoggedClient::new(inner, role, Arc::clone(&calls)));
        RoleClient {
            client: Arc::new(BudgetedClient::new(logged, role, prices.clone(), Arc::clone(&state))),
            model: format!("{role}-model"),
        }
    };
    let verifier: Arc<dyn ModelClient> = Router::new(Vec::new());
    let roles = Roles {
        planner: paid(Arc::clone(&setup.planner) as Arc<dyn ModelClient>, "planner"),
        executor: paid(Arc::clone(&setup.executor) as Arc<dyn ModelClient>, "executor"),
        verifier: Some(paid(verifier, "verifier")),
    };
    let mut engine = h.engine(config(setup.jobs));
    engine.config.activity = Some(Arc::default());
    let children = ChildRuns {
        db: pev_store::Location::from(&h.db),
        registry: Arc::clone(&engine.registry),
        ctx: Arc::clone(&engine.ctx),
        config: engine.config.clone(),
        roles: roles.clone(),
        prices: prices.clone(),
        budget: Arc::clone(&state),
        policy: Arc::new(CompiledPolicy::default()),
        calls: Some(Arc::clone(&calls)),
        depth: 1,
        max_depth: 2,
        max_replans: setup.replans,
        judge_threshold: 0.7,
        allowed_tools: setup.allowed.clone(),
    };
    let (note, usage) = (Arc::clone(&state), Arc::clone(&state));
    let verifier = roles.verifier.clone().expect("verifier");
    engine.config.models = Some(ModelHooks {
        executor: Arc::new(ModelExecutor::new(
            Arc::clone(&roles.executor.client),
            roles.executor.model.clone(),
            ExecutorOptions::default(),
        )),
        judge: Some(Arc::new(ModelJudge::new(
            verifier.client,
            verifier.model,
            JudgeOptions::default(),
        ))),
        judge_threshold: 0.7,
        budget_note: Arc::new(move || Some(note.note())),
        usage: Arc::new(move || usage.snapshot()),
        allowed_tools: Vec::new(),
        delegator: Some(Arc::new(children)),
    });
    (engine, calls, state)
}

/// Runs `plan` as a parent run (no replans): its result and id.
async fn run_parent(h: &Harness, setup: &Setup, plan: &Value) -> RunResult {
    let (run_id, plan) = h.create(plan);
    drive_parent(h, setup, run_id, plan).await
}

/// Runs the created run `run_id` as `pev agent` does, without replans (a future a test may
/// drop mid-run, as a crash would).
async fn drive_parent(
    h: &Harness,
    setup: &Setup,
    run_id: String,
    plan: pev_protocol::Plan,
) -> RunResult {
    let (engine, calls, _) = engine(h, setup, &run_id);
    let planner = Planner::new(
        Arc::new(ScriptedClient::from_turns("unused", Vec::new())),
        "planner-model".into(),
        PlannerOptions::default(),
    );
    let policy = CompiledPolicy::default();
    let agent = AgentLoop {
        engine: &engine,
        planner: &planner,
        policy: &policy,
        db: &pev_store::Location::from(&h.db),
        max_replans: 0,
    };
    let result = agent.run(run_id, plan).await.unwrap();
    calls.close();
    assert_eq!(calls.error(), None);
    result
}

fn delegated(id: &str, goal: &str, scope: Option<&str>) -> Value {
    let mut step = json!({"id": id, "delegate": {"goal": goal}});
    if let Some(scope) = scope {
        step["delegate"]["scope"] = json!(scope);
    }
    step
}

/// The journaled run `id`'s record.
fn child(h: &Harness, id: &str) -> pev_store::RunRecord {
    Store::open_existing(&h.db).unwrap().load_run(id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_parallel_children_succeed_and_the_parent_succeeds_on_their_verdicts() {
    let h = Harness::new();
    let planner = Router::new(vec![
        ("[A]", vec![plan_turn(&write_plan("a/out.txt", "alpha", ("a", 400)))]),
        ("[B]", vec![plan_turn(&write_plan("b/out.txt", "beta", ("b", 400)))]),
    ]);
    let setup = Setup::new(planner, Router::new(Vec::new()));
    let mut a = delegated("part-a", "[A] Write alpha to a/out.txt", Some("a"));
    a["assertions"] = json!([{"type": "file_contains", "path": "a/out.txt", "pattern": "alpha"},
                             {"type": "content_changed", "path": "a/out.txt"}]);
    let b = delegated("part-b", "[B] Write beta to b/out.txt", Some("b"));
    let plan = json!({"goal": "Write both parts", "steps": [a, b]});
    let result = run_parent(&h, &setup, &plan).await;

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert!(result.goal_actions_executed);
    assert_eq!(h.read("a/out.txt"), "alpha");
    assert_eq!(h.read("b/out.txt"), "beta");
    // The children ran at the same time: their sleeps overlap.
    let (sa, sb) = (h.probe.span("a"), h.probe.span("b"));
    assert!(sa.start < sb.end && sb.start < sa.end, "the children did not overlap");
    // Each child is a run of its own, linked to its parent step, with its own verdict and
    // its planner's call journaled as its own.
    for (id, path) in [("part-a", "a/out.txt"), ("part-b", "b/out.txt")] {
        let child_id = format!("{}.{id}.1", result.run_id);
        let record = child(&h, &child_id);
        assert_eq!(record.status, "success", "{id}");
        assert_eq!(record.options["parent"]["run"], json!(result.run_id));
        assert_eq!(record.options["parent"]["step"], json!(id));
        assert_eq!(record.options["depth"], json!(1));
        let calls = Store::open_existing(&h.db).unwrap().model_calls(&child_id).unwrap();
        assert_eq!(calls.len(), 1, "{id}: the child's planner call");
        assert_eq!(calls[0].role, "planner");
        let evidence = step(&result, id).evidence.join("\n");
        assert!(evidence.contains(&format!("child run {child_id} ended success")), "{evidence}");
        assert!(result.file_mutations.iter().any(|m| m.path == path), "{id}");
    }
    // The parent's own journal holds no model call: every call was a child's.
    let parent_calls = Store::open_existing(&h.db).unwrap().model_calls(&result.run_id).unwrap();
    assert!(parent_calls.is_empty(), "{parent_calls:?}");
    // The parent's events name each child when it starts and when it ends.
    let events = Store::open_existing(&h.db).unwrap().events(&result.run_id).unwrap();
    let finished: Vec<(String, RunStatus)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::DelegateFinished { step, status, .. } => Some((step.clone(), *status)),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 2, "{finished:?}");
    assert!(finished.iter().all(|(_, s)| *s == RunStatus::Success));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_child_fails_the_step_which_is_retried_then_the_run_is_partial() {
    let h = Harness::new();
    // The lazy child's plan asks its executor to write the file; the executor says it did.
    let lazy_plan = json!({
        "goal": "child",
        "steps": [{"id": "do-it", "description": "Write done to lazy/out.txt",
                   "max_attempts": 1,
                   "assertions": [{"type": "file_exists", "path": "lazy/out.txt"}]}]
    });
    let planner = Router::new(vec![("[LAZY]", vec![plan_turn(&lazy_plan), plan_turn(&lazy_plan)])]);
    let executor = Router::new(vec![(
        "[LAZY]",
        vec![ScriptTurn::text("Done: lazy/out.txt is written."), ScriptTurn::text("Done, really.")],
    )]);
    let setup = Setup::new(planner, executor);
    let mut lazy = delegated("lazy", "[LAZY] Write done to lazy/out.txt", Some("lazy"));
    // Two attempts, then the rest of the plan goes on (a failed `abort`/`retry` step would make
    // the run `failed`, reference §4).
    lazy["on_fail"] = json!("continue");
    lazy["max_attempts"] = json!(2);
    let plan = json!({"goal": "Write the notes and the lazy part", "steps": [
        {"id": "notes", "tool": "file.write", "parameters": {"path": "notes.txt", "content": "n"}},
        lazy
    ]});
    let result = run_parent(&h, &setup, &plan).await;

    assert_eq!(result.status, RunStatus::Partial, "{:?}", result.reasons);
    let lazy = step(&result, "lazy");
    assert_eq!(lazy.status, StepStatus::Failed);
    assert_eq!(lazy.attempts, 2, "the step is retried with a second child");
    let error = lazy.error.clone().unwrap_or_default();
    assert!(error.contains(&format!("child run {}.lazy.2 ended", result.run_id)), "{error}");
    assert!(error.contains("lazy/out.txt"), "the child's reasons are the step's: {error}");
    for attempt in [1, 2] {
        let record = child(&h, &format!("{}.lazy.{attempt}", result.run_id));
        assert_ne!(record.status, "success", "attempt {attempt}");
    }
    // The second child was told why the first failed.
    let second = child(&h, &format!("{}.lazy.2", result.run_id));
    assert!(second.goal.contains("Earlier attempts at this failed"), "{}", second.goal);
    assert_eq!(setup.executor.left("[LAZY]"), 0);
    assert!(
        result
            .reasons
            .iter()
            .any(|r| r.code == ReasonCode::StepFailed && r.step.as_deref() == Some("lazy")),
        "{:?}",
        result.reasons
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_writes_outside_its_scope_is_refused() {
    let h = Harness::new();
    let escaping = json!({
        "goal": "child",
        "steps": [{"id": "write", "tool": "file.write",
                   "parameters": {"path": "b/stolen.txt", "content": "x"}}]
    });
    let planner = Router::new(vec![("[ESC]", vec![plan_turn(&escaping)])]);
    let setup = Setup::new(planner, Router::new(Vec::new()));
    let plan =
        json!({"goal": "Do part a", "steps": [delegated("a", "[ESC] Do part a", Some("a"))]});
    let result = run_parent(&h, &setup, &plan).await;

    assert_ne!(result.status, RunStatus::Success);
    assert!(!h.root.join("b/stolen.txt").exists(), "the write outside the scope happened");
    let record = child(&h, &format!("{}.a.1", result.run_id));
    let call = record.tool_calls.first().expect("the child's call");
    let error = call.error.clone().unwrap_or_default();
    assert!(error.contains("outside `a`"), "{error}");
    assert_eq!(step(&result, "a").status, StepStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_slice_runs_out_is_not_a_success_and_neither_is_its_parent() {
    let h = Harness::new();
    // The child's plan needs its executor twice (a call, then the answer); its slice pays for
    // its planner and one executor call.
    let plan_two_turns = json!({
        "goal": "child",
        "steps": [{"id": "do-it", "description": "Write it to s/out.txt", "max_attempts": 1,
                   "assertions": [{"type": "file_exists", "path": "s/out.txt"}]}]
    });
    let planner = Router::new(vec![("[SLICE]", vec![plan_turn(&plan_two_turns)])]);
    let write = ScriptTurn::blocks(vec![ContentBlock::ToolUse {
        id: "c1".into(),
        name: "file_write".into(),
        input: json!({"path": "s/out.txt", "content": "s"}),
    }]);
    let executor = Router::new(vec![("[SLICE]", vec![write, ScriptTurn::text("Written.")])]);
    let mut setup = Setup::new(planner, executor);
    setup.budget = Budget { max_turns: Some(20), ..Budget::default() };
    let mut sliced = delegated("s", "[SLICE] Write it to s/out.txt", Some("s"));
    sliced["delegate"]["budget"] = json!({"max_turns": 2});
    let plan = json!({"goal": "Write s", "steps": [sliced]});
    let result = run_parent(&h, &setup, &plan).await;

    assert_ne!(result.status, RunStatus::Success, "{:?}", result.reasons);
    let record = child(&h, &format!("{}.s.1", result.run_id));
    let child_result = record.result.expect("the child's result");
    assert_ne!(child_result.status, RunStatus::Success);
    assert!(
        child_result.reasons.iter().any(|r| r.code == ReasonCode::BudgetExhausted),
        "{:?}",
        child_result.reasons
    );
    assert_eq!(child_result.usage.llm_calls, 2, "the slice held the child to 2 calls");
    // The parent's budget paid for the child's calls, and is not what stopped the parent.
    assert_eq!(result.usage.llm_calls, 2, "{:?}", result.usage);
    assert!(!result.reasons.iter().any(|r| r.code == ReasonCode::BudgetExhausted));
    assert_eq!(step(&result, "s").status, StepStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_a_child_resumes_the_tree_without_repeating_its_effects() {
    let h = Harness::new();
    let child_plan = json!({
        "goal": "child",
        "steps": [
            {"id": "first", "tool": "test.count", "parameters": {"key": "first"}},
            {"id": "wait", "tool": "test.sleep", "depends_on": ["first"],
             "parameters": {"key": "wait", "ms": 800}},
            {"id": "last", "tool": "file.write", "depends_on": ["wait"],
             "parameters": {"path": "c/out.txt", "content": "c"},
             "assertions": [{"type": "file_contains", "path": "c/out.txt", "pattern": "c"}]}
        ]
    });
    let planner = Router::new(vec![("[CRASH]", vec![plan_turn(&child_plan)])]);
    let setup = Setup::new(planner, Router::new(Vec::new()));
    let plan = json!({"goal": "Do c", "steps": [delegated("c", "[CRASH] Do c", Some("c"))]});
    let (run_id, parsed) = h.create(&plan);
    // The process dies while the child sleeps: the future is dropped mid-run.
    let cut = tokio::time::timeout(
        Duration::from_millis(400),
        drive_parent(&h, &setup, run_id.clone(), parsed),
    );
    assert!(cut.await.is_err(), "the run finished before the crash");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let child_id = format!("{run_id}.c.1");
    assert_eq!(child(&h, &child_id).status, "running");
    assert_eq!(h.probe.calls("first"), 1);

    // `pev resume` of the parent: the step goes on with the same child.
    let (engine, calls, _) = engine(&h, &setup, &run_id);
    let store = h.store();
    let record = store.load_run(&run_id).unwrap();
    drop(store);
    let journal = Journal::start(&h.db).unwrap();
    let input = ResumeInput {
        record,
        journal: journal.clone(),
        blobs: Default::default(),
        warnings: Vec::new(),
        prior_usage: None,
        revision: None,
    };
    let result = engine.resume(input).await.unwrap();
    journal.close().unwrap();
    calls.close();

    assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
    assert_eq!(h.probe.calls("first"), 1, "the child's finished effect ran again");
    assert_eq!(h.read("c/out.txt"), "c");
    assert_eq!(step(&result, "c").attempts, 1, "the same child went on, no second one");
    assert!(Store::open_existing(&h.db).unwrap().load_run(&format!("{run_id}.c.2")).is_err());
    assert_eq!(child(&h, &child_id).status, "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_past_the_bound_is_refused() {
    let h = Harness::new();
    // Each child's plan delegates again, one level deeper.
    let nest = |tag: &str, next: &str| {
        json!({"goal": "child", "steps": [{"id": format!("deeper-{tag}"),
            "delegate": {"goal": format!("{next} go deeper")}}]})
    };
    let planner = Router::new(vec![
        ("[N1]", vec![plan_turn(&nest("1", "[N2]"))]),
        ("[N2]", vec![plan_turn(&nest("2", "[N3]"))]),
        ("[N3]", vec![plan_turn(&nest("3", "[N4]"))]),
    ]);
    let setup = Setup::new(planner, Router::new(Vec::new()));
    let plan = json!({"goal": "Nest", "steps": [delegated("n", "[N1] go deeper", None)]});
    let result = run_parent(&h, &setup, &plan).await;

    assert_ne!(result.status, RunStatus::Success);
    // Depth 1 and 2 ran; the child at depth 2 could not start a third level.
    let depth1 = format!("{}.n.1", result.run_id);
    let depth2 = format!("{depth1}.deeper-1.1");
    let depth2_record = child(&h, &depth2);
    assert_eq!(depth2_record.options["depth"], json!(2));
    let error = depth2_record.steps[0].error.clone().unwrap_or_default();
    assert!(error.contains("past the bound of 2"), "{error}");
    assert_eq!(setup.planner.left("[N3]"), 1, "no third-level child was planned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_evidence_undone_by_a_later_parent_step_is_a_regression_of_the_parent() {
    let h = Harness::new();
    let planner =
        Router::new(vec![("[A]", vec![plan_turn(&write_plan("a/out.txt", "alpha", ("a", 1)))])]);
    let setup = Setup::new(planner, Router::new(Vec::new()));
    let plan = json!({"goal": "Write a, then overwrite it", "steps": [
        delegated("part-a", "[A] Write alpha to a/out.txt", Some("a")),
        {"id": "undo", "tool": "file.write", "depends_on": ["part-a"],
         "parameters": {"path": "a/out.txt", "content": "gone"}}
    ]});
    let result = run_parent(&h, &setup, &plan).await;

    // The child ended success and its step is done; the workspace the parent left no longer
    // holds what the child verified.
    assert_eq!(step(&result, "part-a").status, StepStatus::Done);
    assert_eq!(result.status, RunStatus::Partial, "{:?}", result.reasons);
    assert!(
        result.reasons.iter().any(|r| r.code == ReasonCode::EvidenceRegressed
            && r.step.as_deref() == Some("part-a")),
        "{:?}",
        result.reasons
    );
    let check = result.final_check.expect("final check");
    let regression = check.regressed.first().expect("a regression");
    assert!(regression.changed_by.iter().any(|c| c.contains("undo")), "{regression:?}");
}

/// Unconfined (no kernel sandbox here), a scoped child's command can write anywhere: when
/// other steps of the tree ran with it, what it changed cannot be listed, so its scope is not
/// shown and the step is not done; run one at a time, the changes are listed and checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfined_commands_whose_changes_cannot_be_listed_leave_the_scope_unshown() {
    let shell = |dir: &str| {
        json!({"goal": "child", "steps": [{"id": "cmd", "tool": "shell.exec",
            "parameters": {"command": format!("sleep 0.3; mkdir -p {dir}; echo x > {dir}/f.txt")}}]})
    };
    let plan = json!({"goal": "Write both parts", "steps": [
        delegated("p1", "[P1] Write p1/f.txt", Some("p1")),
        delegated("p2", "[P2] Write p2/f.txt", Some("p2"))
    ]});
    for jobs in [2, 1] {
        let h = Harness::new();
        let planner = Router::new(vec![
            ("[P1]", vec![plan_turn(&shell("p1"))]),
            ("[P2]", vec![plan_turn(&shell("p2"))]),
        ]);
        let mut setup = Setup::new(planner, Router::new(Vec::new()));
        setup.jobs = jobs;
        let result = run_parent(&h, &setup, &plan).await;
        if jobs == 2 {
            assert_ne!(result.status, RunStatus::Success, "{:?}", result.reasons);
            let error = step(&result, "p1").error.clone().unwrap_or_default();
            assert!(error.contains("whether it kept to its scope `p1` is not known"), "{error}");
        } else {
            assert_eq!(result.status, RunStatus::Success, "{:?}", result.reasons);
            assert!(result.file_mutations.iter().any(|m| m.path == "p2/f.txt"));
        }
    }
}

/// A plan version an agent run did not start with (a replan, a child's plan) may name only the
/// tools the run's policy allowed: checked by the engine before anything of it runs.
#[test]
fn a_plan_naming_a_tool_the_run_does_not_allow_is_not_run() {
    let h = Harness::new();
    let setup = Setup::new(Router::new(Vec::new()), Router::new(Vec::new()));
    let (mut engine, calls, _) = engine(&h, &setup, "r");
    calls.close();
    if let Some(models) = engine.config.models.as_mut() {
        models.allowed_tools = vec!["file.read".into(), "file.write".into()];
    }
    let plan: pev_protocol::Plan = serde_json::from_value(json!({"goal": "g", "steps": [
        {"id": "ok", "tool": "file.write", "parameters": {"path": "a", "content": "x"}},
        {"id": "no", "tool": "shell.exec", "parameters": {"command": "true"}}
    ]}))
    .unwrap();
    let err = engine.check_plan(&plan).expect_err("shell.exec is not allowed");
    assert!(err.to_string().contains("step `no` names `shell.exec`"), "{err}");
    let fine: pev_protocol::Plan = serde_json::from_value(json!({"goal": "g", "steps": [
        {"id": "ok", "tool": "file.read", "parameters": {"path": "a"}}
    ]}))
    .unwrap();
    assert!(engine.check_plan(&fine).is_ok());
}

/// A child that cannot go on (its replan names a tool the run does not allow) ends `failed`
/// with why, its record closed; the parent step fails with that reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_the_engine_cannot_carry_on_ends_failed_not_running() {
    let h = Harness::new();
    let lazy = json!({"goal": "child", "steps": [{"id": "do-it", "description": "Write r/x.txt",
        "max_attempts": 1, "on_fail": "replan",
        "assertions": [{"type": "file_exists", "path": "r/x.txt"}]}]});
    let denied = json!({"goal": "child", "steps": [{"id": "sh", "tool": "shell.exec",
        "parameters": {"command": "touch r/x.txt"}}]});
    let planner = Router::new(vec![("[R]", vec![plan_turn(&lazy), plan_turn(&denied)])]);
    let executor = Router::new(vec![("[R]", vec![ScriptTurn::text("Done.")])]);
    let mut setup = Setup::new(planner, executor);
    setup.replans = 1;
    setup.allowed = vec!["file.read".into(), "file.write".into(), "file.patch".into()];
    let plan =
        json!({"goal": "Write r", "steps": [delegated("r", "[R] Write r/x.txt", Some("r"))]});
    let result = run_parent(&h, &setup, &plan).await;

    assert_ne!(result.status, RunStatus::Success);
    let child_id = format!("{}.r.1", result.run_id);
    let record = child(&h, &child_id);
    assert_eq!(record.status, "failed", "the child's record is closed");
    let error = step(&result, "r").error.clone().unwrap_or_default();
    assert!(error.contains("could not go on"), "{error}");
    assert!(error.contains("shell.exec"), "{error}");
    assert!(!h.root.join("r/x.txt").exists(), "the denied command never ran");
}
